#!/usr/bin/env bash
# Prints, for each test the last ctest run in build directory DIR failed, the
# last LINES lines of its output (from ctest's Testing/Temporary logs).
# scripts/test.sh and scripts/sanitize.sh call it after a failing ctest and
# print what it gives again at the very end, so a CI log that keeps only its
# tail still says which test failed and how.
#
# Usage: scripts/ctest_failed.sh DIR [LINES]   (LINES default 40)
set -uo pipefail
dir=$1
lines=${2:-40}
tmp=$dir/Testing/Temporary
[ -f "$tmp/LastTestsFailed.log" ] || exit 0
while IFS=: read -r _ name; do
    [ -n "$name" ] || continue
    echo "--- failed: $name ($dir), the last $lines lines of its output:"
    # A test's block in LastTest.log runs from "N/M Test: name" to the line
    # '"name" end time: ...'.
    awk -v t="$name" '
        $0 ~ "^[0-9]+/[0-9]+ Test: " && substr($0, index($0, ": ") + 2) == t { on = 1 }
        on { print }
        on && index($0, "\"" t "\" end time") == 1 { exit }
    ' "$tmp/LastTest.log" | tail -n "$lines"
done <"$tmp/LastTestsFailed.log"
