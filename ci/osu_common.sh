# shellcheck shell=bash
# Sourced by the OSU scripts after mps_common.sh: two ranks on GPU 0 under
# the MPS daemon, the reference prefix, and a logged run.
#   Before sourcing: LOG (the runs' log), RUN_TAG (outputs are /tmp/<tag>_<name>),
#   RUN_TIMEOUT (seconds per run).
OSU_BASE="mpirun --allow-run-as-root -np 2 --bind-to core -x CUDA_VISIBLE_DEVICES=0
      -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
# osu_ref <more mpirun arguments>: Open MPI's pml ucx over the CUDA-enabled UCX
# in GPU_UCX_LIB, or nothing where there is none.
osu_ref() {
    [ -n "${GPU_UCX_LIB:-}" ] || return 0
    echo "$OSU_BASE -x LD_LIBRARY_PATH=$GPU_UCX_LIB:/usr/local/nvidia/lib64:/usr/local/cuda/lib64
         --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any
         -x UCX_TLS=cuda_copy,cuda_ipc,sm,self $*"
}
mkdir -p "$(dirname "$LOG")" && : >"$LOG"
# run <name> <prefix> <program> <args...>: output kept as /tmp/<tag>_<name>,
# its exit status as a last line rc=N.
run() {
    local name=$1 pre=$2; shift 2
    echo "### $name: $*" >>"$LOG"
    # shellcheck disable=SC2086
    timeout "$RUN_TIMEOUT" $pre "$@" >"/tmp/${RUN_TAG}_$name" 2>&1
    echo "rc=$?" >>"/tmp/${RUN_TAG}_$name"
    cat "/tmp/${RUN_TAG}_$name" >>"$LOG"
}
# val <name> <size>: the second column of that run's row for the size.
val() { awk -v s="$2" '$1==s {print $2}' "/tmp/${RUN_TAG}_$1" | head -1; }
