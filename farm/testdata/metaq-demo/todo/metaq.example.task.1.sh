#!/bin/bash
#METAQ NODES 2
#METAQ GPUS 5
#METAQ MIN_WC_TIME 10
#METAQ PROJECT metaq.demo

echo "working hard..."
sleep 40            # The 'hard work' is a sham!
echo "done!"


