#!/bin/bash
# Runs one case of the farm. Edit the part between the ++++ lines.
#
# The meta-job runs this script once per case, in the farm directory, with:
#   $ID         the case ID from table.dat (a unique seed for the case, etc.)
#   $COMM       the case's line of table.dat without its ID
#   $METAJOB_ID the job ID of the meta-job running the case (for per-job files)
# The script's exit status is the case's STATUS: 0 means success, anything
# else means the case failed and `farm resubmit` will run it again.

# ++++++++++++++++++++++  This part can be customized:  ++++++++++++++++++++++++
# Each case runs in its own subdirectory RUN$ID, which the meta-job makes
# before it starts this script (config: RUN_DIRS=1). For very large farms,
# prefer one output file per meta-job (e.g. -o output.$METAJOB_ID), set
# RUN_DIRS=0 and delete the next line: millions of small directories are slow
# on shared filesystems.
cd "RUN$ID" 2>/dev/null || { mkdir -p "RUN$ID" && cd "RUN$ID"; } || exit 1

# Execute the command (the case's line of table.dat). A line may hold several
# commands separated by semicolons.
eval "$COMM"

# STATUS of the case: here, the exit code of the command. Set it from your own
# checks if exit codes are not enough, e.g.
#   test -s out.dat || STATUS=1
STATUS=$?
# +++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++

exit $STATUS
