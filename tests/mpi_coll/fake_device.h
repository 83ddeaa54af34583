/*
 * What the simulated GPU's files share (fake_device.c, fake_team.c,
 * fake_device_board.c).
 */
#ifndef GPUWIRE_TESTS_FAKE_DEVICE_H
#define GPUWIRE_TESTS_FAKE_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "gpuwire/gpu_device.h"

enum { FAKE_TEAM_MAX = 8 };

/* msg into why; -1. */
int fake_fail(char *why, size_t why_len, const char *msg);
/* The simulated team (fake_team.c); its board (fake_device_board.c) reads
 * it here, so that the team alone uses the board. */
/* A started call, in the team's FIFO. */
typedef struct fake_team_call {
    gw_coll_team_call_t c;
    uint64_t seq;
    int step;               /* 0 not begun, 1 arrived, 2 departed */
    struct timespec since;  /* the current step's start, for the timeout */
    struct fake_team_call *next;
} fake_team_call_t;

struct gw_coll_team {
    int gpu, rank, nranks, fd;
    size_t slot, seg_bytes;
    double timeout_s;
    uint64_t calls, finished;
    bool failed;
    fake_team_call_t *first, *last; /* started, not finished */
    char *seg[FAKE_TEAM_MAX];       /* every rank's workspace, mine included */
};

static inline bool fake_team_open(const gw_coll_team_t *t) { return t->fd >= 0; }
static inline int fake_team_rank(const gw_coll_team_t *t) { return t->rank; }
static inline int fake_team_nranks(const gw_coll_team_t *t) { return t->nranks; }
/* The delegated form (fake_device_board.c): whether it is on
 * (GW_FAKE_NVLINK_DELEGATE), a device buffer's description for it (-1 where
 * it is off), and the team's board released with the team. */
bool fake_delegate(void);
int fake_board_describe(const void *ptr, size_t len, void *desc);
/* Whether p is memory of the simulated GPU (either kind). */
bool fake_is_device(const void *p);
/* Host staging buffers lent and not given back. */
long fake_staging_lent(void);
/* A synchronous copy to or from it (fake_device.c). */
void fake_dev_copy(void *dst, const void *src, size_t len);
void fake_board_close(gw_coll_team_t *t);

#endif
