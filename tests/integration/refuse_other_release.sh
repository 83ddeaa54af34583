#!/bin/sh
# A pml gpuwire built for another Open MPI release must refuse to load and say
# why, naming both releases, instead of crashing inside MPI.
#   refuse_other_release.sh <mpirun> <component path> <claimed major.minor> <program>
set -u
MPIRUN=$1 CPATH=$2 CLAIMED=$3 PROG=$4
out=$("$MPIRUN" --allow-run-as-root -np 1 --mca mca_base_component_path "$CPATH" \
      --mca pml gpuwire "$PROG" 2>&1)
rc=$?
if [ $rc -eq 0 ]; then
    echo "FAIL: the job ran although the component claims Open MPI $CLAIMED"
    exit 1
fi
running=$(ompi_info | sed -n 's/^ *Open MPI: *//p' | head -1)
if echo "$out" | grep -q "built for Open MPI $CLAIMED.* but Open MPI $running is running"; then
    echo "PASS: refused with: $(echo "$out" | grep 'built for Open MPI' | head -1)"
    exit 0
fi
echo "FAIL: no refusal line naming $CLAIMED and $running; output was:"
echo "$out" | head -20
exit 1
