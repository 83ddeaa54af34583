#!/bin/sh
# The main job: install the dependencies, build, install the components where
# Open MPI finds them (~/.openmpi/components), and run gpuwire's benchmark
# under `mpirun --mca pml gpuwire` on 2 ranks: GPU buffers where a GPU is
# present, host buffers otherwise.
set -eu
cd "$(dirname "$0")/.."
ci/setup.sh
ci/build.sh -DGPUWIRE_BUILD_TESTS=OFF
# Components go to ~/.openmpi/components; the tools under PREFIX (default ~/.local).
cmake --install "${BUILD_DIR:-build}" --prefix "${PREFIX:-$HOME/.local}"
BENCH="${BUILD_DIR:-build}/bench/gwbench"
MODE=""
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    MODE="--device"
fi
ROOT_FLAG=""
[ "$(id -u)" -ne 0 ] || ROOT_FLAG="--allow-run-as-root"
echo "running: mpirun -np 2 --mca pml gpuwire $BENCH $MODE"
exec mpirun $ROOT_FLAG -np 2 --bind-to none --mca pml gpuwire "$BENCH" $MODE
