/*
 * The statistics table printed once per job at finalize (pml_gpuwire_stats,
 * coll_gpuwire_stats): every process contributes one row of counters, one
 * process prints them all.
 *
 * This part knows nothing of Open MPI, so it lives in the core
 * (ucx_glue/common): it packs a row into the blob each process publishes,
 * unpacks it on the printing side and formats the table. The components'
 * plugin/common/gpuwire_stats_exchange.h moves the blobs through the
 * runtime.
 *
 * Table layout (columns right-aligned, widths fitted to the numbers):
 *
 *   <title>
 *    rank  sent  sent B  ...
 *       0    12    4096  ...      one row per process, up to max_rows processes;
 *       1     -       -  ...      "-": the process published nothing
 *     min     3     100  ...      above max_rows: min and max over the
 *     max    12    4096  ...      processes instead
 *   total    30    8192  ...
 *   <legend>
 */
#ifndef GPUWIRE_STATS_TABLE_H
#define GPUWIRE_STATS_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "gpuwire/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the blob that carries ncols counters. */
GW_CORE_API size_t gw_stats_blob_size(size_t ncols);

/* Writes ncols counters into blob (gw_stats_blob_size(ncols) bytes). */
GW_CORE_API void gw_stats_blob_pack(void *blob, const uint64_t *values, size_t ncols);

/* Reads a blob written by gw_stats_blob_pack with the same ncols; returns 0,
 * or -1 (values untouched) when size or contents do not match. */
GW_CORE_API int gw_stats_blob_unpack(const void *blob, size_t size, uint64_t *values,
                                     size_t ncols);

/* Formats the table. values holds nrows x ncols counters, row by row;
 * present[r] == 0 marks a process that published nothing (shown as "-",
 * left out of min, max and total). legend may be NULL. Returns a malloc'ed
 * string ending in a newline, or NULL when memory runs out. */
GW_CORE_API char *gw_stats_table_format(const char *title, const char *const *columns,
                                        size_t ncols, const uint64_t *values,
                                        const unsigned char *present, size_t nrows,
                                        size_t max_rows, const char *legend);

#ifdef __cplusplus
}
#endif

#endif
