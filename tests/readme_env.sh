#!/bin/sh
# Fails when the README's environment table is not the generator's output.
# usage: readme_env.sh ZCCL_CONFIG README.md
set -eu
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
sed -n '/BEGIN ENV TABLE/,/END ENV TABLE/p' "$2" | sed '1d;$d' > "$tmp"
"$1" --markdown | diff -u "$tmp" - && echo "README environment table is current"
