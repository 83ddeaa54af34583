#!/bin/sh
# An rsh agent for Open MPI (--mca plm_rsh_agent) that "logs in" to a
# simulated host: it runs the command inside the network namespace owning
# the host's address, on this same machine.
#   netns_rsh.sh <host address> <command...>
# GW_NETNS_HOSTS="10.213.7.2=nsname ..." maps addresses to namespaces;
# without an entry, the namespace holding the address is looked up.
set -eu
host=$1
shift
ns=
for pair in ${GW_NETNS_HOSTS:-}; do
    if [ "${pair%%=*}" = "$host" ]; then
        ns=${pair#*=}
    fi
done
if [ -z "$ns" ]; then
    for cand in $(ip netns list | awk '{print $1}'); do
        if ip -n "$cand" -o -4 addr show | grep -q " $host/"; then
            ns=$cand
            break
        fi
    done
fi
if [ -z "$ns" ]; then
    echo "netns_rsh.sh: no network namespace has address $host" >&2
    exit 255
fi
exec ip netns exec "$ns" sh -c "$*"
