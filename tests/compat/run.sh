#!/bin/sh
# The compat driver: install the build to a temporary prefix, build every
# program of programs.list with its own Makefile (only ASCEND_HOME_PATH and
# MPI given), run each at every rank count of NPS (default "2 4 8", more ranks
# than cores allowed) and check its results and paths.
#   usage: run.sh BUILD_DIR SOURCE_DIR [NPS]
# A run passes when it exits 0, prints its expected text (programs.list) and
# no "check_result: fail", and, for programs marked zero, every stats line
# shows "0 buffered ops". Stats lines are the library's own "zccl stats:"
# lines (ZCCL_PRINT_STATS=1) when it has that setting, else the programs'
# "compat stats:" lines read from zccl's counters.
set -u
build=$1
src=$2
nps=${3:-"2 4 8"}
here=$src/tests/compat
work=$(mktemp -d "${TMPDIR:-/tmp}/zt-compat.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT INT TERM
prefix=$work/prefix

if ! cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1; then
    cat "$work/install.log"
    echo "compat: cmake --install failed"
    exit 1
fi
# CANN Makefiles link from $ASCEND_HOME_PATH/lib64 (the install lays it out).
export LD_LIBRARY_PATH="$prefix/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The default device count must fit 8 ranks of one device each.
unset ZCCL_DEVICES
# Only a library that knows the setting gets it (an unknown ZCCL_ name is
# reported as misspelt).
if "$prefix/bin/zccl_config" --markdown 2>/dev/null | grep -q ZCCL_PRINT_STATS; then
    export ZCCL_PRINT_STATS=1
fi
mpirun="${MPIEXEC:-mpirun} --oversubscribe --allow-run-as-root --mca btl self,vader --bind-to none"
cp -r "$here" "$work/src"

# rank_table LAYOUT N FILE: a table of N ranks, rank r on device r.
rank_table() {
    r=0
    if [ "$1" = v1 ]; then
        printf '{"status": "completed", "version": "1.0", "server_count": "1",\n' >"$3"
        printf ' "server_list": [{"server_id": "node_0", "device": [\n' >>"$3"
        while [ $r -lt "$2" ]; do
            sep=","; [ $((r + 1)) -eq "$2" ] && sep=""
            printf '  {"device_id": "%d", "device_ip": "192.168.1.%d", "rank_id": "%d"}%s\n' \
                $r $((r + 8)) $r "$sep" >>"$3"
            r=$((r + 1))
        done
        printf ' ]}]}\n' >>"$3"
    else
        printf '{"status": "completed", "version": "2.0", "rank_count": %d, "rank_list": [\n' \
            "$2" >"$3"
        while [ $r -lt "$2" ]; do
            sep=","; [ $((r + 1)) -eq "$2" ] && sep=""
            printf '  {"rank_id": %d, "local_id": %d, "device_id": %d, "level_list": []}%s\n' \
                $r $r $r "$sep" >>"$3"
            r=$((r + 1))
        done
        printf ']}\n' >>"$3"
    fi
}

# check NAME STATS LOG RC EXPECT: the pass rule above; prints one summary line.
check() {
    ok=1
    [ "$4" -eq 0 ] || ok=0
    good=$(grep -c "$5" "$3")
    grep -q "check_result: fail" "$3" && ok=0
    [ "$good" -gt 0 ] || ok=0
    stats=$(grep "zccl stats:" "$3")
    [ -n "$stats" ] || stats=$(grep "compat stats:" "$3")
    nstats=$(printf '%s\n' "$stats" | grep -c stats)
    nonzero=$(printf '%s\n' "$stats" | grep stats | grep -vc " 0 buffered ops")
    if [ "$2" = zero ] && { [ "$nstats" -eq 0 ] || [ "$nonzero" -ne 0 ]; }; then
        ok=0
    fi
    if [ $ok -eq 1 ]; then
        echo "compat: $1: ok ($good checks passed, $nstats stats lines, $nonzero with buffered ops)"
        return 0
    fi
    echo "compat: $1: FAILED (exit $4, $good checks passed, $nstats stats lines, $nonzero with buffered ops):"
    tail -n 40 "$3"
    return 1
}

start=$(date +%s)
grep -v '^#' "$here/programs.list" | while read -r name launch rule expect; do
    [ -n "$name" ] || continue
    if ! make -s -C "$work/src/$name" ASCEND_HOME_PATH="$prefix" >"$work/$name.make.log" 2>&1; then
        cat "$work/$name.make.log"
        echo "compat: $name: build FAILED"
        echo x >>"$work/failed"
        continue
    fi
    for np in $nps; do
        log=$work/$name.$np.log
        case $launch in
        mpi)
            (cd "$work/src/$name" && timeout 180 $mpirun -np "$np" "./$name" </dev/null) >"$log" 2>&1
            check "$name np $np" "$rule" "$log" $? "$expect" || echo x >>"$work/failed"
            ;;
        mpi-dir)
            mkdir -p "$work/$name.$np.out"
            (cd "$work/src/$name" &&
                timeout 180 $mpirun -np "$np" "./$name" "$work/$name.$np.out" </dev/null) \
                >"$log" 2>&1
            check "$name np $np" "$rule" "$log" $? "$expect" || echo x >>"$work/failed"
            ;;
        threads)
            (cd "$work/src/$name" && timeout 180 "./$name" "$np" </dev/null) >"$log" 2>&1
            check "$name $np threads" "$rule" "$log" $? "$expect" || echo x >>"$work/failed"
            ;;
        ranktable)
            for layout in v1 v2; do
                rank_table $layout "$np" "$work/table_$layout.$np.json"
                (cd "$work/src/$name" &&
                    timeout 180 $mpirun -np "$np" "./$name" "$work/table_$layout.$np.json" </dev/null) \
                    >"$log" 2>&1
                check "$name np $np ($layout table)" "$rule" "$log" $? "$expect" ||
                    echo x >>"$work/failed"
            done
            ;;
        *)
            echo "compat: $name: unknown launch '$launch'"
            echo x >>"$work/failed"
            ;;
        esac
    done
done
nfailed=0
[ -f "$work/failed" ] && nfailed=$(wc -l <"$work/failed")
echo "compat: done in $(($(date +%s) - start)) s, $nfailed failed"
[ "$nfailed" -eq 0 ]
