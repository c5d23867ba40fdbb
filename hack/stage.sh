#!/usr/bin/env bash
# Runs one stage of a build or test run and, when STAGE_LOG names a file, appends its name, wall
# time in seconds, exit code and start (seconds since the epoch) there, tab-separated, so that
# .ci/run can print where its time went. Stages may overlap: the table gives each one's start
# and the run's elapsed time, not a sum.
#
#   hack/stage.sh <name> <command> [args...]
#   hack/stage.sh --table <file>     prints the stages a file holds as a table
set -uo pipefail

if [[ "${1:-}" == "--table" ]]; then
  [[ -s "$2" ]] || exit 0
  sort -t$'\t' -k4,4n "$2" | awk -F'\t' '
    { name[NR] = $1; secs[NR] = $2; rc[NR] = $3; start[NR] = $4
      if (NR == 1 || $4 < first) first = $4
      if ($4 + $2 > last) last = $4 + $2 }
    END {
      elapsed = last - first
      printf "\n%-30s %9s %10s %6s  %s\n", "stage", "start", "wall", "of run", "result"
      for (i = 1; i <= NR; i++) {
        at = start[i] - first
        printf "%-30s %+5dm%02ds %6dm%02ds %5.1f%%  %s\n", name[i], at / 60, at % 60, secs[i] / 60, secs[i] % 60, elapsed ? 100 * secs[i] / elapsed : 0, (rc[i] == 0 ? "ok" : "exit " rc[i])
      }
      printf "%-30s %9s %6dm%02ds  (first start to last end)\n", "elapsed", "", elapsed / 60, elapsed % 60
    }'
  exit 0
fi

name="$1"
shift
begin=$(date +%s)
start=$SECONDS
"$@"
rc=$?
if [[ -n "${STAGE_LOG:-}" ]]; then
  printf '%s\t%d\t%d\t%d\n' "$name" "$((SECONDS - start))" "$rc" "$begin" >> "$STAGE_LOG"
fi
exit "$rc"
