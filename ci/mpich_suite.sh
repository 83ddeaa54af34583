#!/bin/bash
# MPICH's public test suite (test/mpi) against gpuwire's components.
#   ci/mpich_suite.sh build <mpich dir> <bin dir>
#     <mpich dir> holds MPICH's test/mpi and confdb (an ignored folder, e.g.
#     `git archive` of pmodels/mpich unpacked under .ref/); configures the suite
#     with Open MPI's mpicc (with CUDA where /usr/local/cuda has it, so the
#     tests can allocate device, pinned and managed buffers), builds the tests
#     of the list and copies them, stripped, to <bin dir> (about 1 MB: small
#     enough to carry to the GPU machine). Needs autoconf, automake, libtool.
#   ci/mpich_suite.sh run <gpuwire build dir> <bin dir> <out dir> [list]
#     runs every line of the list (default ci/mpich_gpu.list: MPICH's own GPU
#     lists, device buffers in every collective, point-to-point and one-sided
#     test) with pml, coll and osc gpuwire, MPICH_P at a time (default 3),
#     under CUDA MPS where a GPU is present; a test passes when it exits 0 and
#     prints "No Errors". Writes <out dir>/mpich/summary.txt and a log per test.
#     MPICH_TL: seconds per test (default 150).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIST_DEFAULT=$ROOT/ci/mpich_gpu.list

tests_of() { grep -v '^#' "$1" | awk 'NF {print $1 "/" $2}' | sort -u; }

build() {
    local src bin t
    src=$(cd "$1" && pwd) || exit 2
    mkdir -p "$2" && bin=$(cd "$2" && pwd) && t=$src/test/mpi
    if [ ! -d "$t" ] || [ ! -d "$src/confdb" ]; then
        echo "mpich_suite: no test/mpi and confdb under $src"; exit 2
    fi
    [ -d "$t/confdb" ] || cp -r "$src/confdb" "$t/confdb"
    [ -x "$t/configure" ] || (cd "$t" && ./autogen.sh >"$t/autogen.log" 2>&1) ||
        { echo "mpich_suite: autogen.sh failed ($t/autogen.log)"; exit 1; }
    local cuda=()
    [ -f /usr/local/cuda/include/cuda_runtime_api.h ] && cuda=(--with-cuda=/usr/local/cuda)
    if [ ! -f "$t/Makefile" ]; then
        (cd "$t" && ./configure CC=mpicc "${cuda[@]}" --disable-fortran --disable-cxx \
            --disable-spawn --disable-ft-tests --enable-strictmpi --disable-threads \
            --disable-part --disable-threadcomm --disable-perftest >"$t/configure.out" 2>&1) ||
            { echo "mpich_suite: configure failed ($t/configure.out, config.log)"; exit 1; }
    fi
    if ! make -C "$t/util" -j"$(nproc)" >/dev/null || ! make -C "$t/dtpools" -j"$(nproc)" >/dev/null; then
        echo "mpich_suite: the suite's util or dtpools did not build"; exit 1
    fi
    local dt
    for dt in $(tests_of "$LIST_DEFAULT"); do
        make -C "$t/${dt%/*}" "${dt#*/}" >/dev/null 2>&1 || { echo "mpich_suite: $dt did not build"; continue; }
        mkdir -p "$bin/${dt%/*}" && cp "$t/$dt" "$bin/$dt" && strip "$bin/$dt"
    done
    echo "mpich_suite: $(find "$bin" -type f | wc -l) tests in $bin"
}

run_one() { # <n> <dir> <test> <np> [args]
    local n=$1 d=$2 t=$3 np=$4; shift 4
    local log=$OUTD/$n-$t.log s0 rc st=FAIL
    s0=$(date +%s)
    (cd "$BIN/$d" && timeout -k 5 "$MPICH_TL" mpirun --oversubscribe --bind-to none -np "$np" \
        --mca mca_base_component_path "$OMPI_LIB:$GWBUILD/components" --mca pml gpuwire \
        --mca coll gpuwire,inter,tuned,libnbc,basic,self --mca osc gpuwire,sm \
        -x LD_LIBRARY_PATH ./"$t" "$@") >"$log" 2>&1
    rc=$?
    [ $rc -eq 0 ] && grep -q "No Errors" "$log" && st=PASS
    [ $rc -eq 124 ] && st=TIMEOUT
    echo "$st rc=$rc $(($(date +%s) - s0))s $n $d $t np=$np $*"
}

run() {
    GWBUILD=$(cd "$1" && pwd) BIN=$(cd "$2" && pwd) OUTD=$3/mpich
    local list=${4:-$LIST_DEFAULT}
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
    if nvidia-smi -L >/dev/null 2>&1; then
        # shellcheck source=ci/mps_common.sh
        . "$ROOT/ci/mps_common.sh"
    fi
    OMPI_LIB=$(ompi_info --path pkglibdir --parsable | sed 's/.*pkglibdir://')
    MPICH_TL=${MPICH_TL:-150}
    mkdir -p "$OUTD"
    export GWBUILD BIN OUTD OMPI_LIB MPICH_TL
    export -f run_one
    grep -v '^#' "$list" | awk 'NF {print NR, $0}' |
        xargs -P "${MPICH_P:-3}" -L 1 bash -c 'run_one "$@"' _ | tee "$OUTD/summary.txt"
    local pass all
    pass=$(grep -c '^PASS' "$OUTD/summary.txt"); all=$(grep -c . "$OUTD/summary.txt")
    echo "mpich_suite: $pass of $all passed"
    grep -v '^PASS' "$OUTD/summary.txt" | while read -r _ _ _ n _ t _; do
        echo "--- $n $t"; grep -v '^\s*$' "$OUTD/$n-$t.log" | head -12
    done
    [ "$pass" -eq "$all" ]
}

case "${1:-}" in
build) shift; build "$@" ;;
run) shift; run "$@" ;;
*) sed -n '2,17p' "$0"; exit 2 ;;
esac
