/*
 * Non-contiguous datatypes on GPU memory: the layout as a list of blocks
 * (gpuwire/cuda/pack.h), built from the datatype's description with Open
 * MPI's opal_convertor_raw() -- the user's memory is never read on the host
 * -- then packed or unpacked by one kernel of the cuda module.
 *
 * Blocks come in packed order; ranges adjacent in the user's buffer are
 * merged. Each call builds its list afresh (no cache per datatype) and is
 * synchronous: the data is in place when it returns.
 */
#ifndef PML_GPUWIRE_DEVDT_H
#define PML_GPUWIRE_DEVDT_H

#include <stddef.h>

#include "gpuwire/cuda/pack.h"
#include "ompi/datatype/ompi_datatype.h"

/* The blocks of count elements of dtype at buf covering the first limit
 * packed bytes (SIZE_MAX: all of them). *blocks is malloc'ed, the caller
 * frees it; NULL with *nblocks 0 when there is nothing. OMPI_SUCCESS,
 * OMPI_ERR_OUT_OF_RESOURCE or OMPI_ERROR. */
int pml_gw_devdt_blocks(ompi_datatype_t *dtype, size_t count, const void *buf, size_t limit,
                        gw_block_t **blocks, size_t *nblocks);

/* Packs count elements of dtype at buf (memory of GPU device) into packed,
 * a device buffer of the full packed size. OMPI_SUCCESS, or an error with
 * one line in why. */
int pml_gw_devdt_pack(ompi_datatype_t *dtype, size_t count, const void *buf, int device,
                      void *packed, char *why, size_t why_len);

/* Unpacks the first len bytes of packed into count elements of dtype at
 * buf; bytes of buf past them are left untouched. */
int pml_gw_devdt_unpack(ompi_datatype_t *dtype, size_t count, void *buf, int device,
                        const void *packed, size_t len, char *why, size_t why_len);

#endif
