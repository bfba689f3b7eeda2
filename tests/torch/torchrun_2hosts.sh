#!/usr/bin/env bash
# DDP under `torchrun --nnodes 2` across two namespace hosts, zccl's tier across
# hosts under the backend. Run by tests/multihost/run.sh (which makes the hosts,
# exports UCX_TLS, UCX_NET_DEVICES and HCCL_SOCKET_IFNAME and always removes them):
#   torchrun_2hosts.sh TAG NETNS PYTHON [NPROC_PER_NODE (2)] [BACKEND (zccl)]
# One torchrun per host (static rendezvous at host 1's address), each running
# torchrun_worker.py, which checks that its ranks span 2 hosts and that DDP's
# weights equal a one-process run's. Exit status: 0 when both launchers exit 0.
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: torchrun_2hosts.sh TAG NETNS PYTHON [NPROC] [BACKEND]" >&2; exit 2; }
tag=$1
netns=$2
py=$3
nproc=${4:-2}
backend=${5:-zccl}
here=$(cd "$(dirname "$0")" && pwd)
addr=$("$netns" exec "$tag" 1 ip -4 -o addr show zcnet0 | awk '{sub(/\/.*/, "", $4); print $4}')
[ -n "$addr" ] || { echo "torchrun_2hosts: no address on host 1" >&2; exit 1; }
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
for k in 1 2; do
    # Gloo (to check the test itself) resolves the hostname unless told the interface.
    "$netns" exec "$tag" "$k" env GLOO_SOCKET_IFNAME=zcnet0 ZT_BACKEND="$backend" \
        ZT_EXPECT_HOSTS=2 OMP_NUM_THREADS=1 timeout -k 5 150 "$py" -m torch.distributed.run \
        --nnodes 2 --node-rank $((k - 1)) --nproc-per-node "$nproc" --master-addr "$addr" \
        --master-port 29500 "$here/torchrun_worker.py" >"$logs/h$k" 2>&1 &
    pids+=($!)
done
rc=0
for k in 1 2; do
    wait "${pids[$((k - 1))]}" || { echo "host $k: torchrun failed" >&2; rc=1; }
done
for k in 1 2; do
    sed "s/^/[host $k] /" "$logs/h$k"
done
exit $rc
