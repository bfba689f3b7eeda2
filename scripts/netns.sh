#!/usr/bin/env bash
# Network namespaces as "hosts" on one machine, for the multihost tests and
# the benchmark (root only).
#
#   netns.sh up N [TAG]      make hosts 1..N and print TAG (made up when not given)
#   netns.sh down TAG        remove everything TAG made (idempotent)
#   netns.sh exec TAG HOST CMD...   run CMD on host HOST (a number: 1..N)
#   netns.sh link-down TAG HOST     take HOST's link down (carrier lost, like a pulled cable)
#   netns.sh link-up TAG HOST       and back up
#   netns.sh rsh HOST CMD...        rsh agent for mpirun (TAG from NETNS_TAG): HOST is
#                                   TAGhK, hK or hostK
#   netns.sh mpirun TAG ARGS...     mpirun from the switch namespace with this script as its rsh
#                                   agent, OOB and btl tcp on the hosts' subnet
#   netns.sh list                   tags of every set-up left on this machine
#   netns.sh gc                     remove the set-ups whose maker (the process that ran up) is gone
#   netns.sh check                  exit 0 when namespaces can be made here, else 77 (why on stderr)
#
# Topology of TAG (nothing is made in the caller's namespace, so no address or
# link name of this machine can clash, and set-ups of parallel runs only share
# their name space, which the random TAG keeps apart):
#   TAGsw         the "switch": a namespace with bridge br0 at 10.231.0.254/24
#   TAGh1..TAGhN  the hosts: interface zcnet0 at 10.231.0.K/24, lo up, joined to br0
#                 by a veth pair (its other end pK in TAGsw); each host also has
#                 its own UTS namespace (hostname TAGhK) and IPC namespace, kept as
#                 bind mounts under /run/zccl-netns/TAG, so UCX cannot judge two
#                 hosts co-located by their IPC namespace.
# ip netns exec gives each command its own view of /sys, so tools that list
# interfaces there (UCX) see the host's zcnet0 only.
set -euo pipefail

ZN_SUBNET=10.231.0
ZN_IF=zcnet0
ZN_RUN=/run/zccl-netns
ZN_SELF=$(readlink -f "$0")

zn_die() {
    echo "netns.sh: $*" >&2
    exit 1
}

zn_tag_ok() {
    [[ $1 =~ ^zn[a-z0-9]{1,8}$ ]] || zn_die "bad tag '$1' (zn + up to 8 of [a-z0-9])"
}

# Namespace name of host $2 (1..N) of tag $1.
zn_host() {
    [[ $2 =~ ^[0-9]+$ ]] || zn_die "bad host '$2' (a number)"
    ip netns list | awk '{print $1}' | grep -qx "$1h$2" || zn_die "no host $2 in set-up $1"
    echo "$1h$2"
}

zn_check() {
    if [ "$(id -u)" != 0 ]; then
        echo "netns.sh: not root: network namespaces need root" >&2
        exit 77
    fi
    command -v ip >/dev/null || { echo "netns.sh: no ip command (iproute2)" >&2; exit 77; }
    command -v unshare >/dev/null && command -v nsenter >/dev/null ||
        { echo "netns.sh: no unshare/nsenter (util-linux)" >&2; exit 77; }
    local probe="zncheck$$"
    if ! ip netns add "$probe" 2>/dev/null; then
        echo "netns.sh: ip netns add failed: no CAP_SYS_ADMIN / namespaces here" >&2
        exit 77
    fi
    local ok=1
    ip -n "$probe" link add zca type veth peer name zcb 2>/dev/null || ok=0
    ip netns del "$probe"
    [ $ok = 1 ] || { echo "netns.sh: no veth support" >&2; exit 77; }
}

zn_down() {
    local tag=$1 ns
    zn_tag_ok "$tag"
    # Deleting a namespace deletes the veth ends in it, and with them their peers.
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^${tag}(sw|h[0-9]+)$" || true); do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
    if [ -d "$ZN_RUN/$tag" ]; then
        local f
        for f in "$ZN_RUN/$tag"/*; do
            [ -e "$f" ] || continue
            [ "${f##*/}" = owner ] || umount "$f" 2>/dev/null || umount -l "$f" 2>/dev/null || true
            rm -f "$f"
        done
        rmdir "$ZN_RUN/$tag" 2>/dev/null || true
    fi
}

zn_up() {
    local n=$1 tag=${2:-zn$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')}
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || zn_die "bad host count '$n'"
    zn_tag_ok "$tag"
    ip netns list | awk '{print $1}' | grep -q "^${tag}" && zn_die "tag $tag is in use"
    # A half-made set-up is removed before the error is reported.
    trap 'zn_down "$tag"' ERR
    local sw="${tag}sw" k h
    # The maker first: the process that ran "up" (gc removes the set-up once it is gone).
    mkdir -p "$ZN_RUN/$tag"
    echo "$PPID" >"$ZN_RUN/$tag/owner"
    ip netns add "$sw"
    ip -n "$sw" link set lo up
    ip -n "$sw" link add br0 type bridge
    ip -n "$sw" addr add "$ZN_SUBNET.254/24" dev br0
    ip -n "$sw" link set br0 up
    for k in $(seq 1 "$n"); do
        h="${tag}h$k"
        ip netns add "$h"
        ip -n "$h" link set lo up
        ip link add "$ZN_IF" netns "$h" type veth peer name "p$k" netns "$sw"
        ip -n "$sw" link set "p$k" master br0
        ip -n "$sw" link set "p$k" up
        ip -n "$h" addr add "$ZN_SUBNET.$k/24" dev "$ZN_IF"
        ip -n "$h" link set "$ZN_IF" up
        touch "$ZN_RUN/$tag/uts$k" "$ZN_RUN/$tag/ipc$k"
        unshare --uts="$ZN_RUN/$tag/uts$k" --ipc="$ZN_RUN/$tag/ipc$k" hostname "$h"
    done
    trap - ERR
    echo "$tag"
}

zn_gc() {
    local tag pid
    for tag in $(ip netns list | awk '{print $1}' | sed -n 's/^\(zn[a-z0-9]*\)sw$/\1/p'); do
        pid=$(cat "$ZN_RUN/$tag/owner" 2>/dev/null || echo 0)
        if [ "$pid" = 0 ] || ! kill -0 "$pid" 2>/dev/null; then
            echo "netns.sh: removing set-up $tag left by process $pid" >&2
            zn_down "$tag"
        fi
    done
}

# Run "$@" on host $2 of tag $1: its network, UTS and IPC namespaces.
zn_exec() {
    local tag=$1 k=$2 h
    shift 2
    zn_tag_ok "$tag"
    h=$(zn_host "$tag" "$k")
    exec ip netns exec "$h" nsenter --uts="$ZN_RUN/$tag/uts$k" --ipc="$ZN_RUN/$tag/ipc$k" -- "$@"
}

zn_link() {
    local tag=$1 k=$2 state=$3
    zn_tag_ok "$tag"
    zn_host "$tag" "$k" >/dev/null
    ip -n "${tag}sw" link set "p$k" "$state"
}

# mpirun's rsh agent: called as "agent HOST word..."; the words form one shell
# command line, the way ssh hands them to the remote shell.
zn_rsh() {
    local host=$1 tag=${NETNS_TAG:-} k
    shift
    while [ "${1:-}" = "-x" ] || [ "${1:-}" = "-T" ]; do shift; done
    case $host in
        zn*h[0-9]*) tag=${host%h*}; k=${host##*h} ;;
        host[0-9]*) k=${host#host} ;;
        h[0-9]*) k=${host#h} ;;
        *) zn_die "rsh: host '$host' is not TAGhK, hK or hostK" ;;
    esac
    [ -n "$tag" ] || zn_die "rsh: host '$host' needs NETNS_TAG"
    zn_exec "$tag" "$k" sh -c "$*"
}

zn_mpirun() {
    local tag=$1
    shift
    zn_tag_ok "$tag"
    export NETNS_TAG=$tag
    exec ip netns exec "${tag}sw" mpirun --mca plm_rsh_agent "$ZN_SELF rsh" \
        --mca oob_tcp_if_include "$ZN_SUBNET.0/24" --mca btl_tcp_if_include "$ZN_SUBNET.0/24" \
        "$@"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
    up) [ $# -ge 1 ] || zn_die "usage: up N [TAG]"; zn_up "$@" ;;
    down) [ $# -eq 1 ] || zn_die "usage: down TAG"; zn_down "$1" ;;
    exec) [ $# -ge 3 ] || zn_die "usage: exec TAG HOST CMD..."; zn_exec "$@" ;;
    link-down) [ $# -eq 2 ] || zn_die "usage: link-down TAG HOST"; zn_link "$1" "$2" down ;;
    link-up) [ $# -eq 2 ] || zn_die "usage: link-up TAG HOST"; zn_link "$1" "$2" up ;;
    rsh) [ $# -ge 2 ] || zn_die "usage: rsh HOST CMD..."; zn_rsh "$@" ;;
    mpirun) [ $# -ge 1 ] || zn_die "usage: mpirun TAG ARGS..."; zn_mpirun "$@" ;;
    list) ip netns list | awk '{print $1}' | sed -n 's/^\(zn[a-z0-9]*\)sw$/\1/p' ;;
    check) zn_check ;;
    gc) zn_gc ;;
    *) sed -n '2,16s/^# \{0,1\}//p' "$ZN_SELF" >&2; exit 2 ;;
esac
