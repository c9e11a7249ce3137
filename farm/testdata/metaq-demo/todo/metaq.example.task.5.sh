#!/bin/bash
#METAQ NODES 4
#METAQ GPUS 8
#METAQ MIN_WC_TIME 66
#METAQ PROJECT metaq.demo

echo "working hard..."
sleep 19            # The 'hard work' is a sham!
echo "done!"


