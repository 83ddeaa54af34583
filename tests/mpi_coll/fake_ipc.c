/*
 * The simulated GPU's CUDA IPC (gpuwire/gpu_device.h: buffer_describe,
 * peer_map, peer_unmap), beside fake_device.c, for the test builds of the
 * components (coll and osc "gpuwirefake").
 *
 * Only one kind of simulated device memory can be exported: a PROT_NONE
 * shared mapping of a memfd named "gwfake-ipc" that its process keeps open
 * (tests/mpi_osc/osc_direct.c allocates it). Its description names the
 * process, the descriptor and the range; a peer maps it through
 * /proc/<pid>/fd/<fd>, PROT_NONE again, so the mapping is device memory for
 * fake_device.c too (the CPU cannot touch it; copies open it for the copy
 * only). Every other buffer gets a description every peer refuses, as
 * stream-ordered pools and VMM memory do on a real GPU.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_device.h"
#include "gpuwire/gpu_device.h"

#define FAKE_IPC_MAGIC 0x49464747u /* "GGFI" */

typedef struct {
    uint32_t magic;
    int32_t pid, fd;
    uint32_t pad;
    uint64_t offset; /* of the range's first byte in the memfd */
    uint64_t len;
} fake_ipc_desc_t;

_Static_assert(sizeof(fake_ipc_desc_t) <= GW_COLL_BUF_DESC_BYTES, "fits a description");

struct gw_coll_peer_mapping {
    void *base;
    size_t len;
};

/* The descriptor of this process that holds the memfd with this inode. */
static int fd_of_inode(unsigned long inode)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) return -1;
    int found = -1;
    struct dirent *e;
    while (found < 0 && (e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        struct stat st;
        if (e->d_name[0] != '.' && fd != dirfd(d) && fstat(fd, &st) == 0 &&
            (unsigned long)st.st_ino == inode) {
            found = fd;
        }
    }
    closedir(d);
    return found;
}

int gw_coll_buffer_describe(const void *ptr, size_t len, void *desc, char *why, size_t why_len)
{
    memset(desc, 0, GW_COLL_BUF_DESC_BYTES);
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL) {
        snprintf(why, why_len, "fake IPC: /proc/self/maps unreadable");
        return -1;
    }
    char line[512];
    uintptr_t a = (uintptr_t)ptr;
    fake_ipc_desc_t d = {0};
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi, off, inode;
        char perms[8], dev[16];
        if (sscanf(line, "%lx-%lx %7s %lx %15s %lu", &lo, &hi, perms, &off, dev, &inode) != 6 ||
            a < lo || a >= hi) {
            continue;
        }
        if (strstr(line, "memfd:gwfake-ipc") != NULL && a + len <= hi) {
            d.fd = fd_of_inode(inode);
            d.offset = off + (a - lo);
        }
        break;
    }
    fclose(f);
    /* The delegated form's launcher reaches other device memory through
     * /proc/<pid>/mem (fake_device_board.c). */
    if (d.fd <= 0 && fake_is_device(ptr) && 0 == fake_board_describe(ptr, len, desc)) return 0;
    if (d.fd <= 0) {
        snprintf(why, why_len, "the simulated GPU exports only gwfake-ipc memory");
        return -1;
    }
    d.magic = FAKE_IPC_MAGIC;
    d.pid = (int32_t)getpid();
    d.len = len;
    memcpy(desc, &d, sizeof(d));
    return 0;
}

int gw_coll_peer_map(const void *desc, uint32_t peer_id, gw_coll_peer_mapping_t **out,
                     void **ptr, int *gpu, char *why, size_t why_len)
{
    (void)peer_id;
    *out = NULL;
    fake_ipc_desc_t d;
    memcpy(&d, desc, sizeof(d));
    if (d.magic != FAKE_IPC_MAGIC || d.len == 0) {
        snprintf(why, why_len, "fake IPC: the peer's buffer was not exported");
        return -1;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", d.pid, d.fd);
    int fd = open(path, O_RDWR);
    if (fd < 0) {
        snprintf(why, why_len, "fake IPC: cannot open %s", path);
        return -1;
    }
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    const uint64_t lo = d.offset & ~(page - 1), skip = d.offset - lo;
    const size_t len = (size_t)((skip + d.len + page - 1) & ~(page - 1));
    void *base = mmap(NULL, len, PROT_NONE, MAP_SHARED, fd, (off_t)lo);
    close(fd);
    gw_coll_peer_mapping_t *m = malloc(sizeof(*m));
    if (base == MAP_FAILED || m == NULL) {
        if (base != MAP_FAILED) munmap(base, len);
        free(m);
        snprintf(why, why_len, "fake IPC: cannot map %s", path);
        return -1;
    }
    m->base = base;
    m->len = len;
    *ptr = (char *)base + skip;
    *gpu = 0;
    *out = m;
    return 0;
}

void gw_coll_peer_unmap(gw_coll_peer_mapping_t *m)
{
    if (m == NULL) return;
    munmap(m->base, m->len);
    free(m);
}
