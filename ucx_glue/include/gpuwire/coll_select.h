/*
 * The selection table of coll gpuwire: which algorithm runs a blocking
 * collective on device buffers, per collective, topology and message size,
 * from measurements (ci/gpu_coll_select.sh) instead of thresholds guessed
 * once. Part of the collective engine (ucx_glue/coll/select), so that coll
 * gpuwire and gpuwire-info use the core's one copy; it knows nothing of Open
 * MPI: parsing, lookup, formatting, and which user parameters take a
 * collective out of the table's hands. The shipped table
 * (ucx_glue/coll/select/select_table.txt) is compiled into it.
 *
 * Text format, one row a line ('#' starts a comment, fields by blanks):
 *
 *   <collective> <ranks> <nodes> <ppn> <gpn> <rpg> <nvlink> <min bytes> <max bytes> <algorithm>
 *
 *   collective  allreduce, bcast, allgather, alltoall, reduce, reduce_scatter
 *               (reduce_scatter rows serve Reduce_scatter_block too)
 *   ranks       ranks of the communicator
 *   nodes       nodes it spans
 *   ppn         ranks on the node with the most of them
 *   gpn         GPUs each rank sees on its node
 *   rpg         ranks per GPU: ppn / gpn rounded up (2 and more: a shared GPU, MPS)
 *   nvlink      1: the communicator can have an NVLink team (one node, 2 to 8 ranks,
 *               coll_gpuwire_nvlink on, the set-up did not fail); 0: it cannot
 *   min, max    the call's bytes, both included (allreduce, reduce, bcast: count x
 *               type size; allgather, alltoall: one rank's block; reduce_scatter: the
 *               whole vector), OSU's message size; K, M, G suffixes (x 1024)
 *   algorithm   nvlink (the team: one-shot up to coll_gpuwire_nvlink_oneshot_bytes,
 *               on the application's buffers above), device (on the GPU over
 *               point-to-point), chain (Bcast: the pipelined chain), staged
 *               (through host memory), auto (the built-in rules)
 *
 * Every field but the collective and the algorithm may be '*' (any). The
 * first row that matches wins; no row: the built-in rules ("unmeasured").
 *
 * Threading: none of it locks; a table is read by many threads only once
 * parsed, and replaced by one.
 */
#ifndef GPUWIRE_COLL_SELECT_H
#define GPUWIRE_COLL_SELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuwire/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    GW_SEL_ALLREDUCE,
    GW_SEL_BCAST,
    GW_SEL_ALLGATHER,
    GW_SEL_ALLTOALL,
    GW_SEL_REDUCE,
    GW_SEL_REDUCE_SCATTER,
    GW_SEL_COLLS
} gw_sel_coll_t;

typedef enum {
    GW_SEL_AUTO = 0, /* the built-in rules (also: no row) */
    GW_SEL_NVLINK,
    GW_SEL_DEVICE,
    GW_SEL_CHAIN,
    GW_SEL_STAGED,
    GW_SEL_ALGOS
} gw_sel_algo_t;

#define GW_SEL_ANY (-1)

/* A communicator's topology, the same on every rank (coll_gpuwire_select.c). */
typedef struct {
    int ranks, nodes, ppn, gpn, rpg, nvlink;
} gw_sel_key_t;

typedef struct {
    gw_sel_coll_t coll;
    int ranks, nodes, ppn, gpn, rpg, nvlink; /* GW_SEL_ANY: any */
    uint64_t lo, hi;                         /* bytes, both included */
    gw_sel_algo_t algo;
} gw_sel_row_t;

/* Zero-initialised: an empty table. rows belongs to the table: only
 * gw_sel_parse, gw_sel_load_file and gw_sel_load_shipped set it, only
 * gw_sel_free releases it (C++: gw::SelTable below does). */
typedef struct {
    gw_sel_row_t *rows;
    size_t n;
    char source[256]; /* "shipped", or the file's name */
} gw_sel_table_t;

GW_CORE_API const char *gw_sel_coll_name(gw_sel_coll_t c);
GW_CORE_API const char *gw_sel_algo_name(gw_sel_algo_t a);

/* Parses text (what name holds, for messages) into t, replacing what t held
 * only on success. 0; or -1 with one line in err: "<name>:<line>: <what>;
 * <fix>", t unchanged. */
GW_CORE_API int gw_sel_parse(const char *text, const char *name, gw_sel_table_t *t, char *err,
                             size_t errlen);
/* Reads and parses a file: as gw_sel_parse, also when it cannot be read. */
GW_CORE_API int gw_sel_load_file(const char *path, gw_sel_table_t *t, char *err, size_t errlen);
/* Parses the shipped table (source "shipped"): as gw_sel_parse. The build
 * checks that it parses (gpuwire_unit_select). */
GW_CORE_API int gw_sel_load_shipped(gw_sel_table_t *t, char *err, size_t errlen);
/* Releases t's rows; t is an empty table after it. */
GW_CORE_API void gw_sel_free(gw_sel_table_t *t);

GW_CORE_API bool gw_sel_row_matches(const gw_sel_row_t *r, const gw_sel_key_t *k);
/* The algorithm of the first row for (c, k) whose range holds bytes;
 * GW_SEL_AUTO when none does (*row_out: its index, or -1). */
GW_CORE_API gw_sel_algo_t gw_sel_lookup(const gw_sel_table_t *t, gw_sel_coll_t c,
                                        const gw_sel_key_t *k, uint64_t bytes, int *row_out);
/* Whether any row is for topology k (the table is "measured" there). */
GW_CORE_API bool gw_sel_measured(const gw_sel_table_t *t, const gw_sel_key_t *k);

/* One row in the file's format (no newline). */
GW_CORE_API void gw_sel_format_row(const gw_sel_row_t *r, char *buf, size_t len);
/* The whole table, one row a line, in the file's format; rows that apply to
 * k (NULL: none marked) end with "  # applies here". malloc'ed (the caller frees it);
 * NULL when memory runs out. */
GW_CORE_API char *gw_sel_format(const gw_sel_table_t *t, const gw_sel_key_t *k);
/* The rows joined by "; " on one line (ompi_info's value), "none" for
 * an empty table. malloc'ed, as gw_sel_format. */
GW_CORE_API char *gw_sel_format_line(const gw_sel_table_t *t);

/* The collectives (bits 1 << gw_sel_coll_t) whose algorithm the user chose
 * through a parameter (name without prefix, e.g. "reduce_algorithm"): the
 * table leaves those to the built-in rules. */
GW_CORE_API unsigned gw_sel_user_mask(const char *param);

#ifdef __cplusplus
}

namespace gw {
/* A table that releases its rows when it goes out of scope. */
class SelTable {
public:
    SelTable() = default;
    SelTable(const SelTable &) = delete;
    SelTable &operator=(const SelTable &) = delete;
    ~SelTable() { gw_sel_free(&t_); }
    gw_sel_table_t *get() { return &t_; }
    const gw_sel_table_t &operator*() const { return t_; }
    const gw_sel_table_t *operator->() const { return &t_; }

private:
    gw_sel_table_t t_{};
};
} // namespace gw
#endif

#endif
