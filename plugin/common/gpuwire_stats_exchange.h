/*
 * Brings one row of counters from every process of the job to process 0,
 * which prints them as one table (the core's gpuwire/stats_table.h), at finalize.
 *
 * The rows travel through the runtime's key-value store (PMIx), not through
 * the engine: each process publishes its row, a job-wide fence that collects
 * the published data replaces the plain fence the component does at
 * finalize anyway, and process 0 reads every row from what the fence brought.
 * A process that published nothing (statistics off there, or the publish
 * failed) shows as "-": the lookup never waits for it.
 *
 * Collective over the whole job: every process calls it at the same point
 * (for pml/gpuwire: del_procs, in place of gw_compat_fence). Used only when
 * statistics are on; with them off nothing here runs.
 */
#ifndef GPUWIRE_STATS_EXCHANGE_H
#define GPUWIRE_STATS_EXCHANGE_H

#include <stdint.h>
#include <stdlib.h>

#include "gpuwire_compat.h"
#include "gpuwire/stats_table.h"
#include "ompi/proc/proc.h"
#include "opal/util/output.h"

typedef struct {
    const char *key;              /* runtime key, one per component: "gpuwire.pml.stats" */
    const char *title;            /* first line of the table */
    const char *const *columns;   /* column headers */
    size_t ncols;
    const char *legend;           /* printed under the table, or NULL */
    size_t max_rows;              /* above this many processes: min/max rows */
    int (*progress)(void);        /* served while the fence waits */
} gw_stats_exchange_t;

/* Publishes mine (x->ncols counters), fences, and on process 0 prints the
 * table; returns the fence's status. */
static inline int gw_stats_exchange(const gw_stats_exchange_t *x, const uint64_t *mine)
{
    const uint32_t me = OMPI_PROC_MY_NAME->vpid;
    const uint32_t n = (uint32_t)ompi_process_info.num_procs;
    const size_t bsize = gw_stats_blob_size(x->ncols);
    void *blob = malloc(bsize);
    if (blob) {
        gw_stats_blob_pack(blob, mine, x->ncols);
        (void)gw_compat_publish(x->key, blob, bsize);
        free(blob);
    }
    int rc = gw_compat_fence_collect(x->progress);
    if (OMPI_SUCCESS != rc || 0 != me) return rc;

    uint64_t *values = calloc((size_t)n * x->ncols, sizeof(uint64_t));
    unsigned char *present = calloc(n, 1);
    if (!values || !present) {
        opal_output(0, "%s: not printed (out of memory)", x->title);
        free(values);
        free(present);
        return OMPI_SUCCESS;
    }
    for (uint32_t p = 0; p < n; ++p) {
        void *data = NULL;
        size_t size = 0;
        if (OMPI_SUCCESS == gw_compat_lookup(x->key, p, &data, &size)) {
            present[p] = 0 == gw_stats_blob_unpack(data, size, values + (size_t)p * x->ncols,
                                                   x->ncols);
        }
        free(data);
    }
    char *table = gw_stats_table_format(x->title, x->columns, x->ncols, values, present, n,
                                        x->max_rows, x->legend);
    if (table) {
        opal_output(0, "%s", table);
    } else {
        opal_output(0, "%s: not printed (out of memory)", x->title);
    }
    free(table);
    free(values);
    free(present);
    return OMPI_SUCCESS;
}

#endif
