#!/bin/sh
# Build one CANN-style program of tests/compat/ against an installed prefix,
# with nothing but its own Makefile and ASCEND_HOME_PATH, and run it under
# mpirun with the default device count (ZCCL_DEVICES unset).
# usage: run_one.sh BUILD_DIR SOURCE_DIR PROGRAM NP MPIEXEC
set -eu
build=$1
src=$2
prog=$3
np=$4
mpiexec=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/ascend" >/dev/null
cp -r "$src/tests/compat/$prog" "$tmp/$prog"
make -s -C "$tmp/$prog" ASCEND_HOME_PATH="$tmp/ascend"
cd "$tmp/$prog"
env -u ZCCL_DEVICES "$mpiexec" --oversubscribe --allow-run-as-root --mca btl self,vader \
    --bind-to none -np "$np" "./$prog" "$tmp/out"
