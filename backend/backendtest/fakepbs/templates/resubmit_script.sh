#!/bin/bash
# Job script of the one extra job that -auto adds.
#PBS -l walltime=00:10:00
#PBS -A Your_account_name

# Don't change this line:
exec "${FARM_BIN:-farm}" autojob
