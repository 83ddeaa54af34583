/* What the soak's files share: its state (defined in soak.c), the
 * operations of a round, and the functions of one file that another calls.
 * soak.c: arguments, samples, verdict and main; soak_buffers.c:
 * communicators and the buffers of a round; soak_check.c: payloads written
 * and checked; soak_round.c: one round of the plan. */
#ifndef GPUWIRE_SOAK_H
#define GPUWIRE_SOAK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mpitest.h"
#include "soak_gpu.h"
#include "soak_plan.h"

#define GUARD 64
#define GUARD_BYTE 0xA5
#define ALIGN 256
#define MAX_REPORTS 10

typedef struct {
    const soak_msg_t *m; /* the message meant for it; a wildcard may take another */
    int kind;
    unsigned char *buf;
    size_t cap;          /* bytes the buffer spans (guard excluded) */
    MPI_Datatype type;
    int count;
    MPI_Request req;
    MPI_Status st;
} recv_op_t;

typedef struct {
    const soak_msg_t *m;
    unsigned char *buf;
    MPI_Datatype type;
    int count;
    MPI_Request req;
} send_op_t;

typedef struct {
    unsigned char *base;
    size_t cap, used;
} arena_t;

/* A receive into device or managed memory whose check runs on the GPU; the
 * verdict comes with the others of the round (finish_device_checks). */
typedef struct {
    const recv_op_t *r;
    const soak_msg_t *m;
    int slot, count, want;
} pending_check_t;

typedef struct {
    size_t send[SK_NKINDS], recv[SK_NKINDS], bsend, msg;
} needs_t;

/* The state of the run (soak.c). */
extern soak_config_t cfg;
extern MPI_Comm comms[SC_NCOMMS];
extern int *to_comm[SC_NCOMMS], *to_world[SC_NCOMMS];
extern arena_t send_arena[SK_NKINDS], recv_arena[SK_NKINDS];
extern unsigned char *staging, *bsend_buf;
extern MPI_Status *statuses;
extern size_t staging_cap, bsend_cap;
extern long corrupted, errors, reports;
extern long unplanned; /* corruptions that --inject-corruption did not make */
extern long failed_in[SK_NKINDS]; /* failed checks of received data, by receive buffer kind */
extern unsigned long long injected;
extern pending_check_t *pending;
extern soak_gpu_result_t *gpu_results;
extern int npending;
extern unsigned long long sent_msgs, sent_bytes;
extern uint64_t inject_every; /* --inject-corruption K: one wrong byte in every K-th message */

#define REPORT(...)                                                                        \
    do {                                                                                   \
        if (reports++ < MAX_REPORTS) {                                                     \
            fprintf(stderr, "[rank %d] ", mt_rank);                                        \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
        }                                                                                  \
    } while (0)

/* soak_round.c */
void mpi_ok(int rc, const char *what, const soak_msg_t *m);
void run_round(const soak_plan_t *p, uint64_t round, send_op_t *sends, recv_op_t *recvs,
               MPI_Request *reqs, int *recv_of, unsigned char *seen);
/* soak_buffers.c */
void make_comms(void);
void free_comms(void);
size_t recv_bytes(const soak_plan_t *p, const soak_msg_t *m);
needs_t prescan(void);
void arenas_alloc(const needs_t *need, bool device_only);
void arenas_free(bool device_only);
unsigned char *carve(arena_t *a, size_t n);
/* soak_check.c */
void prepare_send(send_op_t *s, const soak_msg_t *m);
void prepare_recv(recv_op_t *r, const soak_plan_t *p, const soak_msg_t *m);
void free_type(MPI_Datatype *t);
int validate(const recv_op_t *r, const soak_plan_t *p);
void finish_device_checks(void);

#endif
