#!/bin/bash
# Two ranks on two simulated hosts of this machine, without namespaces (no
# root, no iproute2): mpirun gets two host names that resolve nowhere and an
# rsh agent that starts each one's daemon here (ci/local_rsh.sh), so Open MPI
# sees two nodes (plm rsh: an environment may choose another launcher, such
# as OMPI_MCA_plm=isolated, which stays on one node). pml gpuwire then
# treats its peer as remote: no CUDA IPC, no shared staging; UCX runs over
# TCP (and cuda_copy where GW_TWO_HOSTS_UCX_TLS names it).
#
#   two_hosts.sh --mpirun PATH [--component-path PATH] [--np N]
#                [--mca NAME VALUE]... [-x VAR=VALUE]... -- PROGRAM [ARGS...]
# N ranks (default 2), half on each host (ranks 0..N/2-1 on the first).
set -u

mpirun=mpirun component_path= np=2 extra=()
here=$(cd "$(dirname "$0")" && pwd -P)
while [ $# -gt 0 ]; do
    case $1 in
    --mpirun) mpirun=$2; shift 2 ;;
    --component-path) component_path=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --mca) extra+=(--mca "$2" "$3"); shift 3 ;;
    -x) extra+=(-x "$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[ $# -ge 1 ] || { echo "no program given" >&2; exit 2; }
# Open MPI 5 launches through PRRTE, whose launcher and its options differ.
major=$("$mpirun" --version 2>/dev/null | sed -n 's/.*(Open MPI) \([0-9]*\)\..*/\1/p' | head -1)
if [ -n "$major" ] && [ "$major" -ge 5 ]; then
    echo "SKIP: two simulated hosts use ORTE's rsh launcher (Open MPI 4); this is Open MPI $major"
    exit 77
fi

per=$(( (np + 1) / 2 ))
flags=(--oversubscribe --bind-to none -np "$np" --host "gw-host-a:$per,gw-host-b:$per"
       --mca plm rsh --mca plm_rsh_agent "$here/../../ci/local_rsh.sh" --mca routed direct
       --mca pml gpuwire --mca btl self -x UCX_TLS="${GW_TWO_HOSTS_UCX_TLS:-tcp,self}")
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
[ -n "$component_path" ] && flags+=(--mca mca_base_component_path "$component_path")
flags+=("${extra[@]}")
echo "+ $mpirun ${flags[*]} $*"
exec timeout 200 "$mpirun" "${flags[@]}" "$@"
