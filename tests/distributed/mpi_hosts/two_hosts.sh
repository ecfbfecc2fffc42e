#!/bin/sh
# two_hosts.sh MPIRUN PROGRAM [LIMIT_S]: runs PROGRAM (mpi_data_parallel: 2 ranks x batch 32 ==
# 1 x batch 64) on 2 "hosts" of this machine: two network namespaces joined by a virtual link
# (veth) and nothing else, each with its own host name; Open MPI over TCP only (btl tcp,self),
# the hosts named in a hostfile by their link addresses, its remote-shell agent netns_rsh.sh
# standing in for ssh. Passes when PROGRAM passes on both ranks, the ranks ran on the two hosts,
# and the link carried the job's traffic. Skips ("CTNN_SKIP:") where namespaces cannot be made
# (not root, no `ip`/`unshare`, no CAP_NET_ADMIN). Cleans up its namespaces on every exit.
mpirun=$1
prog=$2
limit=${3:-240}
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "CTNN_SKIP: two-host MPI test: $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root to make network namespaces"
command -v ip >/dev/null 2>&1 || skip "no 'ip' (Debian: iproute2)"
command -v unshare >/dev/null 2>&1 || skip "no 'unshare' (Debian: util-linux)"
id=$$
a=ctnn-h0-$id
b=ctnn-h1-$id
va=ctnnva$id
vb=ctnnvb$id
net=10.213.$((id % 250 + 1))
dir=$(mktemp -d) || exit 1
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
ip netns add "$a" 2>/dev/null || skip "cannot make a network namespace here (ip netns add failed)"
ip netns add "$b" || exit 1
unshare --uts true 2>/dev/null || skip "cannot make a UTS namespace here (unshare --uts failed)"
ip link add "$va" type veth peer name "$vb" || skip "cannot make a veth link here"
ip link set "$va" netns "$a" && ip link set "$vb" netns "$b" || exit 1
ip -n "$a" addr add "$net.1/24" dev "$va" && ip -n "$b" addr add "$net.2/24" dev "$vb" || exit 1
for ns in "$a" "$b"; do ip -n "$ns" link set lo up || exit 1; done
ip -n "$a" link set "$va" up && ip -n "$b" link set "$vb" up || exit 1
echo "$a" > "$dir/$net.1.ns"
echo "$b" > "$dir/$net.2.ns"
printf '%s slots=1\n%s slots=1\n' "$net.1" "$net.2" > "$dir/hostfile"
bytes() { cat "/sys/class/net/$va/statistics/rx_bytes"; }
export CTNN_NETNS_DIR="$dir"
start=$(date +%s)
out=$(timeout -k 10 "$limit" ip netns exec "$a" unshare --uts sh -c '
  hostname "$1" || exit 1
  shift
  exec "$@"' sh "$a" "$mpirun" --allow-run-as-root -np 2 --hostfile "$dir/hostfile" --map-by node \
    --mca plm_rsh_agent "$here/netns_rsh.sh" --mca btl tcp,self \
    --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24" -x CTNN_NETNS_DIR \
    sh -c 'echo "rank $OMPI_COMM_WORLD_RANK on host $(hostname)"; exec "$0"' "$prog" 2>&1)
rc=$?
printf '%s\n' "$out"
rx=$(ip netns exec "$a" cat "/sys/class/net/$va/statistics/rx_bytes")
tx=$(ip netns exec "$a" cat "/sys/class/net/$va/statistics/tx_bytes")
echo "mpirun returned $rc after $(($(date +%s) - start)) s; the link carried $rx bytes in, $tx out at $a"
[ "$rc" -eq 0 ] || { echo "FAIL: mpirun returned $rc"; exit 1; }
printf '%s\n' "$out" | grep -q "rank 0 on host $a" || { echo "FAIL: rank 0 did not run on host $a"; exit 1; }
printf '%s\n' "$out" | grep -q "rank 1 on host $b" || { echo "FAIL: rank 1 did not run on host $b"; exit 1; }
[ "$rx" -gt 8192 ] && [ "$tx" -gt 8192 ] || { echo "FAIL: the link between the hosts carried almost nothing"; exit 1; }
echo "PASS: 2 ranks on 2 hosts over TCP"
