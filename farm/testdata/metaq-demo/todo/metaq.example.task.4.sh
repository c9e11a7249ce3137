#!/bin/bash
#METAQ NODES 4
#METAQ GPUS 8
#METAQ MIN_WC_TIME 148
#METAQ PROJECT metaq.demo

echo "working hard..."
sleep 9            # The 'hard work' is a sham!
echo "done!"


