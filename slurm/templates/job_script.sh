#!/bin/bash
# Job script of this farm: every meta-job of the farm runs it.
# Provide here the sbatch arguments to be used by all jobs of this farm.
# It has to contain the run-time switch (either -t or --time); other sbatch
# options can also be given on the command line: farm submit 4 --mem=8G
#SBATCH -t 0-00:10
#SBATCH --mem=4G
#SBATCH -A Your_account_name
# With WHOLE_NODE=1 in config (NWHOLE cases at once per job), ask for a whole
# node instead of --mem above, e.g. on nodes of 192 cores:
#   #SBATCH --nodes=1 --exclusive --mem=0
# or for NWHOLE cores of a shared node: #SBATCH --cpus-per-task=NWHOLE

# Commands placed here run once per meta-job, before its first case
# (e.g. module load ...). Exit non-zero to stop the meta-job on a bad node.

# Don't change this line: it starts the meta-job loop.
exec "${FARM_BIN:-farm}" metajob
