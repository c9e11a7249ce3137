#!/bin/bash
#METAQ NODES 2
#METAQ GPUS 4
#METAQ MIN_WC_TIME 98
#METAQ PROJECT metaq.demo

echo "working hard..."
sleep 19            # The 'hard work' is a sham!
echo "done!"


