#!/bin/sh
# The tools' --version and --help, and the print-once of the config table.
# usage: tools.sh ZCCL_CONFIG VERSION PROG
#   ZCCL_CONFIG --version prints VERSION, --help the usage (both exit 0), an
#   unknown option exits 2; PROG (a program using both libraries) run with
#   ZCCL_PRINT_CONFIG=1 prints the table exactly once: one table per process.
set -eu
tool=$1
version=$2
prog=$3
out=$("$tool" --version)
case $out in
*"(zccl) $version,"*) ;;
*) echo "FAIL: $tool --version printed '$out', want zccl $version"; exit 1 ;;
esac
"$tool" --help | grep -q '^usage: ' || { echo "FAIL: $tool --help prints no usage"; exit 1; }
rc=0
"$tool" --bogus 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || { echo "FAIL: $tool --bogus exited $rc, want 2"; exit 1; }
n=$(ZCCL_PRINT_CONFIG=1 "$prog" 2>&1 >/dev/null | grep -c '^zccl configuration:' || true)
[ "$n" -eq 1 ] || { echo "FAIL: ZCCL_PRINT_CONFIG=1 printed the table $n times, want 1"; exit 1; }
echo "tools: --version $version, --help, bad option; config table printed once"
