#!/bin/bash
# Runs one case of the farm. Edit the part between the ++++ lines.
#
# The meta-job runs this script once per case, in the farm directory, with:
#   $ID         the case ID from table.dat (a unique seed for the case, etc.)
#   $COMM       the case's line of table.dat without its ID (and without
#               what it declares it needs, #FARM ..., if anything)
#   $METAJOB_ID the job ID of the meta-job running the case (for per-job files)
#   $1 $2       the run's table and the case's line number in it, as META
#               passes them ($1 is table.dat, or MISC/table.runR.* in a
#               resubmitted run), and $N_cases the lines of that table
# The script's exit status is the case's STATUS: 0 means success, anything
# else means the case failed and `farm resubmit` will run it again.
#
# To try one case by hand (on an interactive node), as with META:
#   ./single_case.sh table.dat 3      runs the case on line 3 of table.dat
# or `farm run-case ID`, which runs it exactly as a meta-job would.
if [ -z "${METAJOB_ID:-}" ]; then
  if [ $# -ne 2 ] || ! [ "$2" -ge 1 ] 2>/dev/null; then
    echo "usage: ./single_case.sh TABLE LINE (e.g. ./single_case.sh table.dat 3): runs the case on line LINE of TABLE" >&2
    exit 2
  fi
  # The line, with its ID; an unnumbered table's cases are numbered in
  # order, as farm submit numbers them. META's rule: the table carries
  # IDs only if its first case lines (up to 100) start with 1, 2, 3, ...;
  # with TABLE_IDS=1 in config, whatever numbers they start with. farm's
  # own tables (table.dat_, MISC/table.runR.*), and table.dat once the
  # farm has run, always start with their IDs.
  farm_ids=0
  case $(basename "$1") in
  table.dat_ | table.run[0-9]*) farm_ids=1 ;;
  table.dat) [ -n "$(ls -A "$(dirname "$1")/STATUSES" 2>/dev/null)" ] && farm_ids=1 ;;
  esac
  grep -Eq "^[[:space:]]*TABLE_IDS[[:space:]]*=[[:space:]]*[\"']?1[\"']?[[:space:]]*(#.*)?\$" "$(dirname "$1")/config" 2>/dev/null && farm_ids=1
  farm_case=$(awk -v n="$2" -v ids="$farm_ids" '{ sub(/\r$/, "") }
    NR == FNR { if ($0 !~ /^[ \t]*(#|$)/ && ++k <= 100 && $1 != k "") plain = 1; next }
    /^[ \t]*(#|$)/ { if (FNR == n) { print "-"; exit } next }
    { j++ }
    FNR == n { if (plain && !ids) print j " " $0; else print; exit }' "$1" "$1") || exit 2
  unset farm_ids
  case $farm_case in
  "") echo "single_case.sh: $1 has no line $2" >&2; exit 2 ;;
  -) echo "single_case.sh: line $2 of $1 is blank or a comment, not a case" >&2; exit 2 ;;
  esac
  read -r ID COMM <<< "$farm_case"
  unset farm_case
  echo "Case $ID (line $2 of $1): $COMM"
fi

# ++++++++++++++++++++++  This part can be customized:  ++++++++++++++++++++++++
# Each case runs in its own subdirectory RUN$ID, which the meta-job makes
# before it starts this script (config: RUN_DIRS=1). For very large farms,
# set RUN_DIRS=0 and delete the next line: millions of small directories are
# slow on shared filesystems. What a case writes to its standard output and
# error is kept apart all the same (config: OUTPUT=job; 'farm output ID').
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
