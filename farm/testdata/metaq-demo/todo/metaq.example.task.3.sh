#!/bin/bash
#METAQ NODES 3
#METAQ GPUS 4
#METAQ MIN_WC_TIME 124
#METAQ PROJECT metaq.demo

echo "working hard..."
sleep 7            # The 'hard work' is a sham!
echo "done!"


