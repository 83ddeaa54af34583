#!/bin/sh
# A component copied without its help file (help-gpuwire.txt) still prints
# its one-line message, compiled in, and never Open MPI's "Sorry! You were
# supposed to get help about ..." box. The component used is the copy that
# claims another Open MPI release, so its register function refuses to load.
#   help_fallback.sh <mpirun> <Open MPI component dir> <claiming mca_pml_gpuwire.so> <program>
set -u
MPIRUN=$1 OMPI_DIR=$2 SO=$3 PROG=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp "$SO" "$dir/"
[ ! -e "$dir/help-gpuwire.txt" ] || { echo "FAIL: the help file is there"; exit 1; }
out=$("$MPIRUN" --allow-run-as-root -np 1 --mca mca_base_component_path "$OMPI_DIR:$dir" \
      --mca pml gpuwire "$PROG" 2>&1)
if echo "$out" | grep -q "Sorry"; then
    echo "FAIL: Open MPI looked for the missing help file:"; echo "$out" | head -20; exit 1
fi
if echo "$out" | grep -q "gpuwire pml was built for Open MPI .* rebuild gpuwire"; then
    echo "PASS: without the help file: $(echo "$out" | grep 'built for Open MPI' | head -1)"
    exit 0
fi
echo "FAIL: no refusal line; output was:"; echo "$out" | head -20
exit 1
