#!/usr/bin/env bash
# Many ranks on one host: for each rank count (default 64 128 256; forked ranks, oversubscribed
# past the cores) one table row: init time (the slowest rank's), mean op times from rank 0 of
# fp32 SUM AllReduce of 8 B (inline) and 1 MiB (zero-copy), AllGather of 4 KiB per rank and
# Barrier, and the mean Pss per rank (/proc/<pid>/smaps_rollup, after the ops). The ops are
# those tests/mp/test_mp_ranks.c checks; here they run in timed loops.
#
# Usage: scripts/bench_ranks.sh [N...]   (BUILD: the build folder, default build)
# Hold the benchmark lock of the machine while it runs (other timed runs skew every row).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
if [ $# -eq 0 ]; then
    set -- 64 128 256
fi
exec "$BUILD/tests/test_mp_ranks" --bench "$@"
