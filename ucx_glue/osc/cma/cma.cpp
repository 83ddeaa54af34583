// Host windows on this node, reached without the target (gpuwire/osc.h):
// Linux cross-memory attach (process_vm_readv / process_vm_writev), the
// kernel copying between the two address spaces in one system call, as
// Open MPI's btl/vader does with its CMA single-copy mechanism. It needs
// the right to ptrace the target (same user, and a Yama ptrace_scope or a
// seccomp profile that allow it): gw_osc_cma_probe finds out once per
// target, and a target it refuses keeps the message path.
#include "gpuwire/osc.h"

#include <sys/types.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

extern "C" {

int gw_osc_cma_probe(int pid, uint64_t addr, char *why, size_t why_len)
{
    char byte;
    struct iovec local = {&byte, 1};
    struct iovec remote = {reinterpret_cast<void *>(static_cast<uintptr_t>(addr)), 1};
    if (process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0) == 1) return 0;
    std::snprintf(why, why_len, "process_vm_readv: %s", std::strerror(errno));
    return -1;
}

int gw_osc_cma_copy(int pid, bool put, void *local, uint64_t remote, size_t len, char *why,
                    size_t why_len)
{
    // The kernel may move fewer bytes than asked (a page at a time at worst).
    size_t done = 0;
    while (done < len) {
        struct iovec l = {static_cast<char *>(local) + done, len - done};
        struct iovec r = {reinterpret_cast<void *>(static_cast<uintptr_t>(remote + done)),
                          len - done};
        ssize_t n = put ? process_vm_writev(static_cast<pid_t>(pid), &l, 1, &r, 1, 0)
                        : process_vm_readv(static_cast<pid_t>(pid), &l, 1, &r, 1, 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            std::snprintf(why, why_len, "%s of %zu bytes %s process %d: %s",
                          put ? "process_vm_writev" : "process_vm_readv", len - done,
                          put ? "to" : "from", pid, n < 0 ? std::strerror(errno) : "no progress");
            return -1;
        }
        done += static_cast<size_t>(n);
    }
    return 0;
}

}  // extern "C"
