#!/bin/bash
# Runs a command under a CUDA MPS control daemon of its own (pipe and log
# folders under /tmp, passed to the ranks with mpirun -x), stopped at the end;
# the GPU's settings are left as they are. Exits 77 (skipped) without a GPU
# or without nvidia-cuda-mps-control.
#   under_mps.sh <command...>
command -v nvidia-cuda-mps-control >/dev/null || { echo "SKIP: no nvidia-cuda-mps-control"; exit 77; }
nvidia-smi -L >/dev/null 2>&1 || { echo "SKIP: no GPU (CUDA driver or device absent)"; exit 77; }
MPS=$(mktemp -d /tmp/gw-mps-test.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY=$MPS/pipe CUDA_MPS_LOG_DIRECTORY=$MPS/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d || { echo "the MPS daemon did not start"; exit 1; }
trap 'echo quit | nvidia-cuda-mps-control; rm -rf "$MPS"' EXIT
sleep 1
"$@"
