# shellcheck shell=bash
# Sourced by the GPU scripts that run several ranks on one GPU: starts the CUDA
# MPS control daemon with its pipe and log folders under /tmp, stops it on
# exit, and leaves the GPU's settings as they are.
OMPI_LIB=$(ompi_info --path pkglibdir --parsable | sed 's/.*pkglibdir://')
# A script started by one that runs the daemon already uses that one: never
# two daemons at once.
if [ -n "${GW_MPS_RUNNING:-}" ]; then return 0; fi
command -v nvidia-cuda-mps-control >/dev/null || { echo "no nvidia-cuda-mps-control here"; exit 77; }
nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU (CUDA driver or device absent)"; exit 77; }
MPS=$(mktemp -d /tmp/gw-mps.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY=$MPS/pipe CUDA_MPS_LOG_DIRECTORY=$MPS/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d || { echo "the MPS daemon did not start"; exit 1; }
trap 'echo quit | nvidia-cuda-mps-control; rm -rf "$MPS"' EXIT
export GW_MPS_RUNNING=1
sleep 2
