#!/bin/bash
#METAQ NODES 4
#METAQ GPUS 2
#METAQ MIN_WC_TIME 13
#METAQ PROJECT metaq.demo

echo "working hard..."
sleep 18            # The 'hard work' is a sham!
echo "done!"


