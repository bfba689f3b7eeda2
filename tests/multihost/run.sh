#!/usr/bin/env bash
# A multihost test on one machine: run.sh NHOSTS LIMIT_S CMD [ARG...]
#
# Makes NHOSTS namespace "hosts" with scripts/netns.sh, runs CMD with every
# @TAG@ in its arguments replaced by the set-up's tag (and @NETNS@ by the path
# of netns.sh), at most LIMIT_S seconds, and removes the set-up whatever
# happens (an EXIT trap; the limit stays below ctest's timeout so the trap
# runs before ctest could kill this script; set-ups of runs killed anyway are
# removed by the next run's gc). Exits 77 (ctest skip) when not root or when
# namespaces cannot be made here, else CMD's status.
#
# The environment CMD gets: UCX_TLS=tcp,self (UCX judges processes of two
# namespaces co-located and would take shared memory between them),
# UCX_NET_DEVICES=zcnet0 (loopback is each namespace's own, so UCX must not
# try it towards another host),
# HCCL_SOCKET_IFNAME=zcnet0 (each host's interface: the root info advertises
# its address), mpirun's two run-as-root variables. Before CMD it prints the
# topology and the lanes UCX picks on host 1 under those settings.
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: run.sh NHOSTS LIMIT_S CMD [ARG...]" >&2; exit 2; }
nhosts=$1
limit=$2
shift 2
netns=$(readlink -f "$(dirname "$0")/../../scripts/netns.sh")
"$netns" check || exit $?
"$netns" gc
tag=$("$netns" up "$nhosts") || exit 1
trap '"$netns" down "$tag"' EXIT
trap 'exit 143' INT TERM HUP

export UCX_TLS=tcp,self UCX_NET_DEVICES=zcnet0 HCCL_SOCKET_IFNAME=zcnet0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "# set-up $tag: switch ${tag}sw (br0 10.231.0.254/24), hosts:"
for k in $(seq 1 "$nhosts"); do
    echo "#   $("$netns" exec "$tag" "$k" sh -c 'echo "$(hostname): $(ip -br -4 addr show zcnet0)"')"
done
if command -v ucx_info >/dev/null; then
    echo "# UCX_TLS=$UCX_TLS UCX_NET_DEVICES=$UCX_NET_DEVICES, lanes of an endpoint on host 1:"
    "$netns" exec "$tag" 1 ucx_info -e -u t | grep 'lane\['
fi
args=()
for a in "$@"; do
    a=${a//@TAG@/$tag}
    args+=("${a//@NETNS@/$netns}")
done
t0=$(date +%s.%N)
timeout --kill-after=5 "$limit" "${args[@]}"
rc=$?
echo "# exit $rc after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s"
[ $rc = 124 ] && echo "# killed after the limit of $limit s"
exit $rc
