#!/bin/bash
#METAQ NODES 2
#METAQ GPUS 8
#METAQ MIN_WC_TIME 126
#METAQ PROJECT metaq.demo

echo "working hard..."
sleep 14            # The 'hard work' is a sham!
echo "done!"


