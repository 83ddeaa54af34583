#!/bin/bash
# mpi4py's own test suite (its test/ folder, at the tag of the installed
# mpi4py) against gpuwire's components: pml, coll and osc gpuwire, the MPI
# layer as the pml installs it. Where CuPy imports and a GPU is present, the
# suite's buffer tests run on CuPy arrays (device memory) as well.
#   ci/mpi4py_suite.sh <gpuwire build dir> <mpi4py test dir> <out dir> [ranks...]
#     <mpi4py test dir>: an ignored folder, e.g. `git archive 4.1.2 test` of
#     mpi4py/mpi4py unpacked under .ref/. Ranks: default "1 2 3", under CUDA MPS
#     where a GPU is present. MPI4PY_ARGS: more arguments for the suite's
#     main.py (e.g. "--no-numpy" to leave host arrays out; "--no-array" also
#     fails the suite's mpi4py.util.sync tests, which import array);
#     MPI4PY_SKIP: test modules to leave out (e.g. "spawn dynproc"; default none);
#     MPI4PY_TL: seconds per run (default 400); MPI4PY_PY: the Python
#     (default python3).
#     Writes <out dir>/mpi4py/np<N>.log and prints each run's unittest summary
#     and its first failures. Exit status 0 when every run ended OK.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 3 ]; then sed -n '2,16p' "$0"; exit 2; fi
GWBUILD=$(cd "$1" && pwd) || exit 2
TESTS=$(cd "$2" && pwd) || exit 2
OUTD=$3/mpi4py
shift 3
NPS=${*:-1 2 3}
PY=${MPI4PY_PY:-python3}
[ -f "$TESTS/main.py" ] || { echo "mpi4py_suite: no main.py in $TESTS"; exit 2; }
"$PY" -c 'import mpi4py' 2>/dev/null || { echo "mpi4py_suite: $PY has no mpi4py"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
ARGS=${MPI4PY_ARGS-}
SKIP=""
for m in ${MPI4PY_SKIP-}; do SKIP="$SKIP -e $m"; done
if nvidia-smi -L >/dev/null 2>&1; then
    # shellcheck source=ci/mps_common.sh
    . "$ROOT/ci/mps_common.sh"
fi
if "$PY" -c 'import cupy; assert cupy.cuda.runtime.getDeviceCount() > 0' 2>/dev/null; then
    echo "mpi4py_suite: CuPy $("$PY" -c 'import cupy; print(cupy.__version__)') on a GPU: the buffer tests run on device arrays too"
else
    echo "mpi4py_suite: no CuPy with a GPU: host arrays only"
fi
OMPI_LIB=$(ompi_info --path pkglibdir --parsable | sed 's/.*pkglibdir://')
mkdir -p "$OUTD"
all_ok=0
for np in $NPS; do
    log=$OUTD/np$np.log
    s0=$(date +%s)
    # shellcheck disable=SC2086
    (cd "$TESTS" && timeout -k 5 "${MPI4PY_TL:-400}" mpirun --oversubscribe --bind-to none -np "$np" \
        --mca mca_base_component_path "$OMPI_LIB:$GWBUILD/components" --mca pml gpuwire \
        --mca coll gpuwire,inter,tuned,libnbc,basic,self --mca osc gpuwire,sm \
        -x LD_LIBRARY_PATH -x PYTHONDONTWRITEBYTECODE=1 \
        "$PY" main.py -q $SKIP $ARGS) >"$log" 2>&1
    rc=$?
    summary=$(grep -E '^(Ran [0-9]+ tests|OK|FAILED)' "$log" | sort | uniq -c | tr -s ' ' | xargs)
    echo "mpi4py np=$np rc=$rc $(($(date +%s) - s0))s: ${summary:-no summary}"
    if [ $rc -ne 0 ]; then
        all_ok=1
        grep -E -A8 '^(ERROR|FAIL):' "$log" | head -60
        grep -E -B2 -A10 'Segmentation|signal|MPI_ERR|gpuwire' "$log" | head -30
    fi
done
exit $all_ok
