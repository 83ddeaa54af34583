#!/bin/sh
# An rsh agent for Open MPI (--mca plm_rsh_agent) that "logs in" to any host
# by running the command on this machine: with host names that resolve
# nowhere, mpirun then starts one daemon per name here, and Open MPI sees
# that many nodes (tests/netns/two_hosts.sh). Each host gets its own
# temporary folder: the daemons' session folders are named after the real
# host name, and two daemons creating the same one collide.
#   local_rsh.sh <host> <command...>
host=$1
shift
TMPDIR=${TMPDIR:-/tmp}/gw-local-rsh-$(id -u)-$host
mkdir -p "$TMPDIR" || exit 1
export TMPDIR
exec sh -c "$*"
