#!/bin/bash
# Job script of this farm, for Grid Engine: every meta-job of the farm runs it.
# Provide here the qsub arguments to be used by all jobs of this farm, on
# lines that begin with #$ in the first column (##$ lines are switched off).
# It has to contain the run-time, -l h_rt= (hours:minutes:seconds, or
# seconds); other qsub options can also be given on the command line:
# farm submit 4 -l h_vmem=8G
#$ -S /bin/bash
#$ -l h_rt=00:10:00
# Memory per slot: the name of the memory resource is site-specific
# (h_vmem, mem_free, ...; 'qconf -sc' lists the resources):
##$ -l h_vmem=4G
# The project the jobs are charged to ('qconf -sprjl' lists the projects):
##$ -P project
# With WHOLE_NODE=1 in config (NWHOLE cases at once per job), ask for NWHOLE
# slots of one node in a parallel environment (NWHOLE as in config):
#   #$ -pe smp NWHOLE
# The names of parallel environments are site-specific: 'qconf -spl' lists
# them; one whose allocation_rule is $pe_slots keeps the slots on one node.

# Commands placed here run once per meta-job, before its first case
# (e.g. module load ...). Exit non-zero to stop the meta-job on a bad node,
# but never with 99 (Grid Engine requeues the job) or 100 (the job goes to
# the error state Eqw, and holds the jobs that wait for it).

# Don't change this line: it starts the meta-job loop.
exec "${FARM_BIN:-farm}" metajob
