#!/bin/bash
# Job script of this farm: every meta-job of the farm runs it.
# It has to contain the run-time (-l walltime=HH:MM:SS).
#PBS -l walltime=00:10:00
#PBS -l mem=4gb
#PBS -A Your_account_name

# Don't change this line: it starts the meta-job loop.
exec "${FARM_BIN:-farm}" metajob
