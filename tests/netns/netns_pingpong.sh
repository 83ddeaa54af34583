#!/bin/bash
# Two ranks on two simulated hosts: two network namespaces joined by a veth
# pair, mpirun started in the first, the second rank's daemon started in the
# second through ci/netns_rsh.sh. Runs an MPI program (a validating
# ping-pong) across them. Exit 77 (skip) without root or ip netns.
#
#   netns_pingpong.sh --mpirun PATH --pml NAME [--component-path PATH]
#                     [--rsh AGENT] -- PROGRAM [ARGS...]
#
# --pml gpuwire and ucx run over UCX's TCP transport on the veth only;
# --pml ob1 over the TCP BTL.
set -u

mpirun=mpirun pml=gpuwire component_path= rsh=
here=$(cd "$(dirname "$0")" && pwd -P)
rsh=$here/../../ci/netns_rsh.sh
while [ $# -gt 0 ]; do
    case $1 in
    --mpirun) mpirun=$2; shift 2 ;;
    --pml) pml=$2; shift 2 ;;
    --component-path) component_path=$2; shift 2 ;;
    --rsh) rsh=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[ $# -ge 1 ] || { echo "no program given" >&2; exit 2; }

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "iproute2 (ip) not installed"
ip netns list >/dev/null 2>&1 || skip "ip netns not usable here"

# Names private to this run; the addresses exist only inside the namespaces.
nsa=gwnet-a-$$ nsb=gwnet-b-$$ dev=gw0
subnet=10.213.7.0/24 addra=10.213.7.1 addrb=10.213.7.2

cleanup() {
    for ns in "$nsa" "$nsb"; do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -n "$pids" ] && kill $pids 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ip netns add "$nsa" 2>/dev/null || skip "cannot create a network namespace"
ip netns add "$nsb" || exit 1
# Both ends get the same name in their namespaces, so one UCX_NET_DEVICES
# value serves both ranks.
ip link add gwa$$ netns "$nsa" type veth peer name gwb$$ netns "$nsb" || exit 1
ip -n "$nsa" link set gwa$$ name $dev && ip -n "$nsb" link set gwb$$ name $dev || exit 1
for side in "$nsa $addra" "$nsb $addrb"; do
    read -r ns addr <<<"$side"
    ip -n "$ns" addr add "$addr/24" dev $dev && ip -n "$ns" link set $dev up &&
        ip -n "$ns" link set lo up || exit 1
done
# A veth end has no carrier until both are up; UCX skips such devices.
for try in $(seq 50); do
    ip -n "$nsa" -o link show $dev | grep -q "state UP" &&
        ip -n "$nsb" -o link show $dev | grep -q "state UP" && break
    sleep 0.1
done

flags=(--allow-run-as-root --oversubscribe --bind-to none -np 2 --host $addra,$addrb
       --mca plm_rsh_agent "$rsh" --mca oob_tcp_if_include $subnet)
[ -n "$component_path" ] && flags+=(--mca mca_base_component_path "$component_path")
case $pml in
ob1) flags+=(--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include $subnet) ;;
*)
    flags+=(--mca pml "$pml" --mca btl self -x UCX_NET_DEVICES=$dev -x UCX_TLS=tcp,self)
    [ "$pml" = ucx ] && flags+=(--mca pml_ucx_tls any --mca pml_ucx_devices any)
    ;;
esac

# For the rsh agent, which mpirun starts with its own environment.
export GW_NETNS_HOSTS="$addra=$nsa $addrb=$nsb"
echo "+ ip netns exec $nsa $mpirun ${flags[*]} $*"
ip netns exec "$nsa" timeout 150 "$mpirun" "${flags[@]}" "$@"
