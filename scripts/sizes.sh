#!/bin/sh
# The largest functions and files of some source folders, to keep them short
# enough to read. Usage: scripts/sizes.sh [-n N] [DIR...] (default: the 10
# largest of hccl/src and vmm/src, from the repository root).
#
# A function is counted from the first line of its signature to its closing
# brace; the code is clang-formatted, so a definition's braces sit in column 0.
set -eu
n=10
if [ "${1:-}" = "-n" ]; then
    n=$2
    shift 2
fi
if [ $# -eq 0 ]; then
    set -- hccl/src vmm/src
fi
files=$(find "$@" -name '*.[ch]' | sort)
echo "## $n largest functions (lines)"
# shellcheck disable=SC2086
awk '
FNR == 1 { sig = ""; infn = 0 }
!infn && /^[A-Za-z_].*\(/ && !/;[ \t]*$/ { sig = $0; sigline = FNR }
!infn && /^[A-Za-z_].*;[ \t]*$/ { sig = "" }
!infn && /^\{/ && sig != "" {
    infn = 1
    match(sig, /[A-Za-z_][A-Za-z_0-9]*\(/)
    name = substr(sig, RSTART, RLENGTH - 1)
}
infn && /^\}/ {
    printf "%5d  %s:%s\n", FNR - sigline + 1, FILENAME, name
    infn = 0
    sig = ""
}' $files | sort -rn | head -n "$n"
echo "## $n largest files (lines)"
# shellcheck disable=SC2086
wc -l $files | grep -v ' total$' | sort -rn | head -n "$n"
