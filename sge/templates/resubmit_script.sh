#!/bin/bash
# Job script of the one extra job that `farm submit -auto` and
# `farm resubmit -auto` add: it runs after the farm's meta-jobs end, then
# resubmits what is left, or submits final.sh once every case succeeded.
# Its decisions go to farm.log in the farm directory.
# For Grid Engine: qsub arguments on #$ lines, -l h_rt= the run-time
# (hours:minutes:seconds); the memory resource's name is site-specific.
# It must not exit 99 (Grid Engine requeues the job) or 100 (error state
# Eqw).
#$ -S /bin/bash
#$ -l h_rt=00:10:00
##$ -l h_vmem=1G
##$ -P project

# Don't change this line:
exec "${FARM_BIN:-farm}" autojob
