#!/bin/bash
# Job script of the one extra job that `farm submit -auto` and
# `farm resubmit -auto` add: it runs after the farm's meta-jobs end, then
# resubmits what is left, or submits final.sh once every case succeeded.
# Its decisions go to farm.log in the farm directory.
#SBATCH -t 0-00:10
#SBATCH --mem=1G
#SBATCH -A Your_account_name

# Don't change this line:
exec "${FARM_BIN:-farm}" autojob
