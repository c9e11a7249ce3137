#!/bin/bash
#METAQ NODES 1
#METAQ GPUS 3
#METAQ MIN_WC_TIME 71
#METAQ PROJECT metaq.demo

echo "working hard..."
sleep 25            # The 'hard work' is a sham!
echo "done!"


