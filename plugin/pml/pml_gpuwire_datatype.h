/*
 * Datatypes in engine terms. A message on the wire is always its packed
 * bytes. A contiguous layout is sent and received in place; any other layout
 * is packed into (or unpacked from) a staging buffer -- with Open MPI's
 * convertor on host memory, with a kernel on GPU memory
 * (pml_gpuwire_devdt.h) -- so the engine only ever sees (address, length).
 */
#ifndef PML_GPUWIRE_DATATYPE_H
#define PML_GPUWIRE_DATATYPE_H

#include "pml_gpuwire.h"
#include "opal/datatype/opal_convertor.h"

/* Packed size of count elements of dtype. */
static inline size_t pml_gpuwire_packed_size(ompi_datatype_t *dtype, size_t count)
{
    return dtype->super.size * count;
}

/* True when count elements of dtype occupy one contiguous range; then
 * *addr is its first byte. */
static inline bool pml_gpuwire_contiguous(ompi_datatype_t *dtype, size_t count, const void *buf,
                                          void **addr)
{
    if (!opal_datatype_is_contiguous_memory_layout(&dtype->super, (int32_t)count)) return false;
    *addr = (char *)buf + dtype->super.true_lb;
    return true;
}

/* Packs count elements at buf into dst (len bytes). */
int pml_gpuwire_pack(ompi_datatype_t *dtype, size_t count, const void *buf, void *dst, size_t len);
/* Unpacks len bytes at src into count elements at buf (len may be less than
 * the full size, when the message was shorter). */
int pml_gpuwire_unpack(ompi_datatype_t *dtype, size_t count, void *buf, const void *src,
                       size_t len);

/* Host messages of a non-contiguous layout from this many packed bytes are
 * packed piece by piece as UCX moves them (gw_layout_t) rather than staged
 * whole: glibc serves a staging buffer this large from fresh memory. */
#define PML_GPUWIRE_LAYOUT_MIN ((size_t)128 << 10)

/* A layout for the engine, over Open MPI's convertor. */
typedef struct {
    gw_layout_t gw;
    opal_convertor_t conv;
} pml_gpuwire_layout_t;

/* Sets up l for sending (send true) or receiving count elements of dtype
 * at buf; pml_gpuwire_layout_fini releases it. */
int pml_gpuwire_layout_init(pml_gpuwire_layout_t *l, bool send, ompi_datatype_t *dtype,
                            size_t count, const void *buf);
void pml_gpuwire_layout_fini(pml_gpuwire_layout_t *l);

#endif
