#!/usr/bin/env bash
# Runs one stage of a build or test run and, when STAGE_LOG names a file, appends its name, wall
# time in seconds and exit code there, tab-separated, so that .ci/run can print where its time went.
#
#   hack/stage.sh <name> <command> [args...]
#   hack/stage.sh --table <file>     prints the stages a file holds as a table, with their total
set -uo pipefail

if [[ "${1:-}" == "--table" ]]; then
  [[ -s "$2" ]] || exit 0
  awk -F'\t' '
    { name[NR] = $1; secs[NR] = $2; rc[NR] = $3; total += $2 }
    END {
      printf "\n%-30s %10s %6s  %s\n", "stage", "wall", "share", "result"
      for (i = 1; i <= NR; i++)
        printf "%-30s %6dm%02ds %5.1f%%  %s\n", name[i], secs[i] / 60, secs[i] % 60, total ? 100 * secs[i] / total : 0, (rc[i] == 0 ? "ok" : "exit " rc[i])
      printf "%-30s %6dm%02ds\n", "total", total / 60, total % 60
    }' "$2"
  exit 0
fi

name="$1"
shift
start=$SECONDS
"$@"
rc=$?
if [[ -n "${STAGE_LOG:-}" ]]; then
  printf '%s\t%d\t%d\n' "$name" "$((SECONDS - start))" "$rc" >> "$STAGE_LOG"
fi
exit "$rc"
