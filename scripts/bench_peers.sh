#!/usr/bin/env bash
# zccl's AllReduce against the peers a CPU user would pick, in one run, at the same sizes, each
# installed from its registry (never vendored) and timed the same way: SUM in place, per size
# one checked op (a wrong result fails the row and the run), then ROUNDS timed loops of about
# BUDGET ms, the best round's time per op (the slowest rank's) kept.
#
#   zccl           build/benchmarks/all_reduce_perf -I 1 -z 1 (activated memory, in place)
#   zccl-torch     torch.distributed all_reduce, zccl backend, activated tensors
#   gloo           torch.distributed all_reduce, Gloo
#   deepspeed-shm  deepspeed.comm.inference_all_reduce, DS_ACCELERATOR=cpu (its shm kernel)
#   oneccl         ccl::allreduce (PyPI's oneccl-devel), oneCCL's defaults
#   oneccl-tuned   the same with ONECCL_TUNED below (no worker offload, libfabric shm)
#   openmpi        MPI_Allreduce, Debian's Open MPI (vader)
#   mpich          MPI_Allreduce, Debian's MPICH
#   intelmpi       MPI_Allreduce, PyPI's Intel MPI (impi-devel)
# The C/C++ drivers and the Python one are benchmarks/peers/. A peer that cannot be installed,
# built or run here, or runs past TIMEOUT, gives rows with `us` empty and a note saying why;
# the run fails only when zccl's own rows fail or a result is wrong.
#
# Installs: deepspeed and ninja into .venv (torch pinned, so pip never replaces it); oneCCL and
# Intel MPI (about 1.8 GB: oneCCL's wheel brings the SYCL runtime) into $BUILD/peers/pip, kept
# out of .venv so Intel MPI's mpirun and libmpi.so.12 never shadow the system's; MPICH by apt.
#
# Writes $OUT/peers.csv (peer,dtype,np,bytes,us,note), $OUT/peers.txt (latency and busbw per
# size and peer, per np and dtype) and $OUT/peers.png. `scripts/bench_peers.sh prepare` only
# installs and builds (no timing), so a later timed run does not wait on pip or compilers.
#
# Environment: BUILD (default build), OUT (default out), NPS (default "2 4 8"; more ranks than
# cores are oversubscribed), SIZES (default 8,64,512,4K,32K,256K,1M,4M,16M,64M; powers of two),
# DTYPES (default "fp32 bf16"), BUDGET (ms per timed round, default 10), ROUNDS (default 5),
# TIMEOUT (seconds per peer, np and dtype, default 150), PEERS (default all of the above).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh gnuplot-nox mpich libmpich-dev
BUILD=${BUILD:-build}
OUT=${OUT:-out}
NPS=${NPS:-2 4 8}
SIZES=${SIZES:-8,64,512,4K,32K,256K,1M,4M,16M,64M}
DTYPES=${DTYPES:-fp32 bf16}
BUDGET=${BUDGET:-10}
ROUNDS=${ROUNDS:-5}
TIMEOUT=${TIMEOUT:-150}
PEERS=${PEERS:-zccl zccl-torch gloo deepspeed-shm oneccl oneccl-tuned openmpi mpich intelmpi}
ONECCL_DEFAULT=(CCL_PROCESS_LAUNCHER=none)
ONECCL_TUNED=(CCL_PROCESS_LAUNCHER=none CCL_WORKER_OFFLOAD=0 CCL_ATL_TRANSPORT=ofi CCL_ATL_SHM=1
              FI_PROVIDER=shm)
PY=$(scripts/venv.sh)
mkdir -p "$BUILD/peers" "$OUT"
P=$(cd "$BUILD/peers" && pwd)
PIP=$P/pip
declare -A BROKEN # peer -> why it cannot run here

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE="$PY" >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target all_reduce_perf zccl_torch_ext

# The last line of a log, for a note (commas would split the CSV field).
why() { { grep -v '^\s*$' "$1" || true; } | tail -n 1 | tr ',\n' '; ' | cut -c1-160; }

# --- install and build ----------------------------------------------------------------------
printf 'torch==2.13.0\nnumpy==%s\n' "$("$PY" -c 'import numpy; print(numpy.__version__)')" \
    >"$P/constraints.txt"
if ! "$PY" -c 'import deepspeed, ninja' 2>/dev/null; then
    echo "peers: pip install deepspeed ninja (into $PY's venv)"
    DS_BUILD_OPS=0 "$PY" -m pip install -q -c "$P/constraints.txt" --no-build-isolation ninja \
        deepspeed >"$P/pip-deepspeed.log" 2>&1 ||
        BROKEN[deepspeed-shm]="pip install deepspeed failed: $(why "$P/pip-deepspeed.log")"
fi
# DeepSpeed JIT-builds its shm op (ninja) on first use; build it here, not in a timed run.
export TORCH_EXTENSIONS_DIR=$P/torch_extensions DS_ACCELERATOR=cpu
export PATH="$(dirname "$PY"):$PATH" # ninja for that build
if [ -z "${BROKEN[deepspeed-shm]:-}" ] && ! "$PY" -c 'from deepspeed.ops.op_builder.cpu import \
ShareMemCommBuilder as B; B().load()' >"$P/deepspeed-build.log" 2>&1; then
    BROKEN[deepspeed-shm]="DeepSpeed's ShareMemComm op did not build: $(why "$P/deepspeed-build.log")"
fi
# oneccl-devel, not the CPU-only wheels: oneccl-cpu 2022.1.2's libccl.so.1 needs a libccl.so.2 that
# it does not ship, and 2022.2 needs PyPI's libfabric>=2.6, not on every index.
if [ ! -e "$PIP/lib/libccl.so.2" ] || [ ! -x "$PIP/bin/mpicc" ]; then
    echo "peers: pip install --prefix $PIP oneccl-devel impi-devel (about 1.8 GB)"
    "$PY" -m pip install -q -c "$P/constraints.txt" --prefix "$PIP" oneccl-devel impi-devel \
        >"$P/pip-intel.log" 2>&1 ||
        BROKEN[intel]="pip install oneccl-devel impi-devel failed: $(why "$P/pip-intel.log")"
fi
PIPLIB=$PIP/lib
build() { # peer log command...: compile a driver; a failure marks the peer
    local peer=$1 log=$2
    shift 2
    "$@" >"$log" 2>&1 || BROKEN[$peer]="build failed: $(why "$log")"
}
W=(-O2 -Wall -Wextra -Ibenchmarks/peers)
build openmpi "$P/openmpi.log" mpicc "${W[@]}" -o "$P/peer_openmpi" benchmarks/peers/peer_mpi.c
build mpich "$P/mpich.log" mpicc.mpich "${W[@]}" -o "$P/peer_mpich" benchmarks/peers/peer_mpi.c
if [ -n "${BROKEN[intel]:-}" ]; then
    BROKEN[intelmpi]=${BROKEN[intel]} BROKEN[oneccl]=${BROKEN[intel]}
else
    build intelmpi "$P/intelmpi.log" env I_MPI_ROOT="$PIP" "$PIP/bin/mpicc" -cc=gcc "${W[@]}" \
        -o "$P/peer_intelmpi" benchmarks/peers/peer_mpi.c
    build oneccl "$P/oneccl.log" g++ -std=c++17 "${W[@]}" -I"$PIP/include" \
        -o "$P/peer_ccl" benchmarks/peers/peer_ccl.cpp -L"$PIPLIB" -lccl -Wl,-rpath-link,"$PIPLIB"
fi
[ -n "${BROKEN[oneccl]:-}" ] && BROKEN[oneccl-tuned]=${BROKEN[oneccl]}
if [ "${1:-}" = prepare ]; then
    for p in "${!BROKEN[@]}"; do echo "peers: $p: ${BROKEN[$p]}"; done
    echo "peers: installed and built"
    exit 0
fi

# --- runs -----------------------------------------------------------------------------------
CORES=$(nproc) # before OMP_NUM_THREADS, which nproc would report
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export PYTHONPATH="$BUILD/torch/python${PYTHONPATH:+:$PYTHONPATH}"
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --bind-to none)
IFS=, read -r -a SIZE_LIST <<<"$SIZES"
bytes() { numfmt --from=iec "$1"; }
CSV=$OUT/peers.csv
echo "peer,dtype,np,bytes,us,note" >"$CSV"
failed=0

# rows peer dtype np file note: one CSV row per size, from the driver's "bytes,us,note" lines;
# a size the driver never printed gets the note.
rows() {
    local peer=$1 dtype=$2 np=$3 file=$4 note=$5 s b line
    for s in "${SIZE_LIST[@]}"; do
        b=$(bytes "$s")
        line=$(grep -m1 "^$b," "$file" 2>/dev/null || true)
        if [ -n "$line" ]; then
            echo "$peer,$dtype,$np,$line" >>"$CSV"
            case $line in *wrong*) failed=1 ;; esac
        else
            echo "$peer,$dtype,$np,$b,,$note" >>"$CSV"
            [ "${peer%%-*}" = zccl ] && failed=1
        fi
    done
    return 0
}

# ranks np command...: oneCCL's ranks, started here (no MPI launcher), each under TIMEOUT.
ranks() {
    local np=$1 r rc=0 pids=()
    shift
    rm -f "$P/kvs"
    for ((r = 0; r < np; r++)); do
        CCL_LOCAL_RANK=$r CCL_LOCAL_SIZE=$np PEER_RANK=$r PEER_NRANKS=$np PEER_KVS=$P/kvs \
            timeout -k 5 "$TIMEOUT" "$@" &
        pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r" || rc=$?; done
    return $rc
}

# run peer dtype np: one peer's sweep into $P/run.out, its rows into the CSV.
run() {
    local peer=$1 dtype=$2 np=$3 out=$P/run.out err=$P/run.err rc=0 note
    local d=$([ "$dtype" = bf16 ] && echo bfloat16 || echo float)
    : >"$out"
    : >"$err"
    if [ -n "${BROKEN[$peer]:-}" ]; then
        rows "$peer" "$dtype" "$np" /dev/null "${BROKEN[$peer]}"
        return
    fi
    case $peer in
    zccl)
        local lo hi
        lo=$(printf '%s\n' "${SIZE_LIST[@]}" | numfmt --from=iec | sort -n | head -n 1)
        hi=$(printf '%s\n' "${SIZE_LIST[@]}" | numfmt --from=iec | sort -n | tail -n 1)
        timeout -k 5 "$TIMEOUT" "${MPIRUN[@]}" -np "$np" "$BUILD/benchmarks/all_reduce_perf" \
            -b "$lo" -e "$hi" -f 2 -I 1 -z 1 -c 1 -m 0 -d "$d" -w 3 -n 10000 --budget "$BUDGET" \
            --repeat "$ROUNDS" --csv "$P/zccl.csv" >"$P/zccl.txt" 2>"$err" || rc=$?
        # size (8), time_us (14), wrong (17) of all_reduce_perf's CSV
        awk -F, 'NR > 1 { print $8 "," $14 "," ($17 > 0 ? "wrong result: " $17 " elements" : "") }' \
            "$P/zccl.csv" >"$out" 2>/dev/null || true
        ;;
    zccl-torch | gloo | deepspeed-shm)
        timeout -k 5 "$TIMEOUT" "$PY" benchmarks/peers/peer_torch.py --peer "$peer" -n "$np" \
            --sizes "$SIZES" --dtype "$dtype" --budget "$BUDGET" --rounds "$ROUNDS" \
            >"$out" 2>"$err" || rc=$?
        ;;
    oneccl | oneccl-tuned)
        local -n settings=$([ "$peer" = oneccl ] && echo ONECCL_DEFAULT || echo ONECCL_TUNED)
        (
            export "${settings[@]}" LD_LIBRARY_PATH="$PIPLIB" FI_PROVIDER_PATH="$PIPLIB"
            ranks "$np" "$P/peer_ccl" "$SIZES" "$dtype" "$BUDGET" "$ROUNDS"
        ) >"$out" 2>"$err" || rc=$?
        ;;
    openmpi | mpich | intelmpi)
        if [ "$dtype" != fp32 ]; then
            rows "$peer" "$dtype" "$np" /dev/null "MPI has no bfloat16 datatype"
            return
        fi
        local launch=("${MPIRUN[@]}")
        [ "$peer" = mpich ] && launch=(mpirun.mpich)
        [ "$peer" = intelmpi ] && launch=(env I_MPI_ROOT="$PIP" LD_LIBRARY_PATH="$PIPLIB"
            FI_PROVIDER_PATH="$PIPLIB" "$PIP/bin/mpiexec.hydra")
        timeout -k 5 "$TIMEOUT" "${launch[@]}" -np "$np" "$P/peer_$peer" "$SIZES" fp32 \
            "$BUDGET" "$ROUNDS" >"$out" 2>"$err" || rc=$?
        ;;
    esac
    if [ $rc = 124 ] || [ $rc = 137 ]; then
        note="timed out after ${TIMEOUT}s (np $np on $CORES cores)"
    elif [ $rc != 0 ]; then
        note="exited $rc: $(why "$err")"
    else
        note="no row printed: $(why "$err")"
    fi
    rows "$peer" "$dtype" "$np" "$out" "$note"
    echo "  $peer: $(grep -c "^$peer,$dtype,$np,[0-9]*,[0-9]" "$CSV")/${#SIZE_LIST[@]} sizes timed" \
        "(exit $rc)"
}

start=$SECONDS
for np in $NPS; do
    for dtype in $DTYPES; do
        echo "== peers np $np $dtype"
        for peer in $PEERS; do
            run "$peer" "$dtype" "$np"
        done
    done
done
"$PY" benchmarks/peers/peers_report.py "$CSV" "$OUT/peers.txt" "$OUT/peers.png"
ds_version=$("$PY" -c 'import deepspeed; print(deepspeed.__version__)' 2>/dev/null || echo -)
pip_version() { ls "$PIP"/lib/python3*/site-packages 2>/dev/null | sed -n "s/^$1-\(.*\)\.dist-info/\1/p"; }
tee -a "$OUT/peers.txt" <<EOF

# Settings ($CORES cores; SIZES=$SIZES BUDGET=$BUDGET ms ROUNDS=$ROUNDS TIMEOUT=$TIMEOUT s)
#   zccl           all_reduce_perf -I 1 -z 1 -c 1 -m 0 -w 3 --budget $BUDGET --repeat $ROUNDS
#   zccl-torch     dist.all_reduce on new_group(backend="zccl"), zccl_torch.use_activated_memory()
#   gloo           dist.all_reduce, init_process_group("gloo")
#   deepspeed-shm  deepspeed $ds_version, DS_ACCELERATOR=cpu LOCAL_SIZE=np, comm.inference_all_reduce
#   oneccl         oneCCL $(pip_version oneccl), ${ONECCL_DEFAULT[*]} (no launcher: CCL_LOCAL_RANK,
#                  CCL_LOCAL_SIZE), else its defaults
#   oneccl-tuned   ${ONECCL_TUNED[*]}
#   zccl, openmpi  $(mpirun --version | head -n 1), ${MPIRUN[*]}
#   mpich          MPICH $(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*//p'), mpirun.mpich, its defaults
#   intelmpi       Intel MPI $(pip_version impi_rt), mpiexec.hydra, its defaults
EOF
echo "peers: $((SECONDS - start)) s; peers.csv, peers.txt and peers.png in $OUT/"
if [ "$failed" = 1 ]; then
    echo "peers: FAILED (zccl's rows did not all run, or a result was wrong; see $CSV)"
    exit 1
fi
