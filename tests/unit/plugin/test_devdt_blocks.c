/*
 * The block lists of pml/gpuwire's device datatype path
 * (plugin/pml/pml_gpuwire_devdt.c), on the host: the kernel calls are
 * replaced by host copies over the same lists, and the result must equal
 * Open MPI's own MPI_Pack / MPI_Unpack byte for byte -- full packs, and
 * unpacks of only a prefix of the packed bytes (a short message), with every
 * byte outside the datatype left untouched. The GPU side of the same path is
 * tested by tests/gpu/test_pack_gpu.cpp and tests/mpi_device/device_datatypes.c.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "pml_gpuwire_devdt.h"

/* The cuda module's entry points, as host copies over the same lists. */
int gw_dev_pack(void *packed, const void *user_base, const gw_block_t *b, size_t n, int device,
                char *why, size_t why_len)
{
    for (size_t i = 0; i < n; ++i) {
        memcpy((char *)packed + b[i].packed_off, (const char *)user_base + b[i].user_off, b[i].len);
    }
    return 0;
}

int gw_dev_unpack(void *user_base, const void *packed, const gw_block_t *b, size_t n, int device,
                  char *why, size_t why_len)
{
    for (size_t i = 0; i < n; ++i) {
        memcpy((char *)user_base + b[i].user_off, (const char *)packed + b[i].packed_off, b[i].len);
    }
    return 0;
}

#define GUARD 64

static void check(const char *name, MPI_Datatype t, int count, size_t max_blocks)
{
    MT_CHECK_MPI(MPI_Type_commit(&t));
    MPI_Aint lb, ext, tlb, text;
    int size;
    MT_CHECK_MPI(MPI_Type_get_extent(t, &lb, &ext));
    MT_CHECK_MPI(MPI_Type_get_true_extent(t, &tlb, &text));
    MT_CHECK_MPI(MPI_Type_size(t, &size));
    const size_t span = (size_t)(text + (count - 1) * ext) + 2 * GUARD;
    const size_t ps = (size_t)size * (size_t)count;
    char *reg = malloc(span), *want = malloc(span), *a = malloc(ps), *b = malloc(ps);
    mt_fill(reg, span, 11);
    char *buf = reg + GUARD - tlb;
    char why[256] = "";

    /* The list: in packed order, covering the packed size, merged. */
    gw_block_t *bl = NULL;
    size_t nb = 0;
    MT_CHECK_EQ(pml_gw_devdt_blocks((ompi_datatype_t *)t, (size_t)count, buf, SIZE_MAX, &bl, &nb),
                OMPI_SUCCESS);
    uint64_t packed = 0;
    for (size_t i = 0; i < nb; ++i) {
        MT_CHECK_EQ(bl[i].packed_off, packed);
        MT_CHECK(bl[i].len > 0);
        MT_CHECK(bl[i].user_off >= tlb && bl[i].user_off + (int64_t)bl[i].len <= tlb + (int64_t)(span - 2 * GUARD));
        packed += bl[i].len;
    }
    MT_CHECK_EQ(packed, ps);
    if (nb > max_blocks) mt_fail(__FILE__, __LINE__, "%s: %zu blocks, more than %zu", name, nb, max_blocks);
    free(bl);

    /* Pack: as MPI_Pack. */
    int pos = 0;
    MT_CHECK_MPI(MPI_Pack(buf, count, t, a, (int)ps, &pos, MPI_COMM_SELF));
    MT_CHECK_EQ(pml_gw_devdt_pack((ompi_datatype_t *)t, (size_t)count, buf, 0, b, why, sizeof(why)),
                OMPI_SUCCESS);
    if (memcmp(a, b, ps) != 0) mt_fail(__FILE__, __LINE__, "%s: pack differs from MPI_Pack", name);

    /* Unpack of a prefix ending inside an element, and of everything. */
    const size_t parts[] = {ps / 2 + 1, ps};
    for (int p = 0; p < 2; ++p) {
        mt_fill(b, ps, 12 + p);
        char *got = malloc(span);
        memcpy(got, reg, span);
        memcpy(want, reg, span);
        MT_CHECK_EQ(pml_gw_devdt_unpack((ompi_datatype_t *)t, (size_t)count, got + GUARD - tlb, 0,
                                        b, parts[p], why, sizeof(why)),
                    OMPI_SUCCESS);
        /* Reference: the region's own packed bytes with the prefix replaced. */
        pos = 0;
        MT_CHECK_MPI(MPI_Pack(want + GUARD - tlb, count, t, a, (int)ps, &pos, MPI_COMM_SELF));
        memcpy(a, b, parts[p]);
        pos = 0;
        MT_CHECK_MPI(MPI_Unpack(a, (int)ps, &pos, want + GUARD - tlb, count, t, MPI_COMM_SELF));
        if (memcmp(got, want, span) != 0) {
            mt_fail(__FILE__, __LINE__, "%s: unpack of %zu of %zu bytes differs from MPI_Unpack",
                    name, parts[p], ps);
        }
        free(got);
    }
    MT_CHECK_MPI(MPI_Type_free(&t));
    free(reg);
    free(want);
    free(a);
    free(b);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    MPI_Datatype t, s0;
    MT_CHECK_MPI(MPI_Type_vector(20, 3, 7, MPI_INT, &t));
    check("vector", t, 5, 100);
    int il[] = {1, 4, 2, 7}, id[] = {0, 3, 11, 20};
    MT_CHECK_MPI(MPI_Type_indexed(4, il, id, MPI_DOUBLE, &t));
    check("indexed", t, 3, 12);
    /* char | gap | double int[3] (adjacent: one block), negative lower bound */
    int sl[] = {1, 1, 3};
    MPI_Aint sd[] = {-8, 8, 16};
    MPI_Datatype st[] = {MPI_CHAR, MPI_DOUBLE, MPI_INT};
    MT_CHECK_MPI(MPI_Type_create_struct(3, sl, sd, st, &s0));
    MT_CHECK_MPI(MPI_Type_create_resized(s0, -8, 40, &t));
    MT_CHECK_MPI(MPI_Type_free(&s0));
    check("struct", t, 1000, 2000);
    int sz[] = {8, 10, 12}, sb[] = {4, 5, 6}, so[] = {1, 2, 3};
    MT_CHECK_MPI(MPI_Type_create_subarray(3, sz, sb, so, MPI_ORDER_C, MPI_FLOAT, &t));
    check("subarray", t, 2, 40);
    MT_CHECK_MPI(MPI_Type_vector(6, 50001, 50007, MPI_BYTE, &t));
    check("vector of long blocks", t, 2, 12);
    MT_CHECK_MPI(MPI_Type_vector(65536, 2, 3, MPI_DOUBLE, &t));
    check("large vector", t, 3, 3 * 65536);
    MT_CHECK_MPI(MPI_Type_vector(333, 3, 5, MPI_BYTE, &t));
    check("byte vector", t, 7, 7 * 333);
    MT_CHECK_MPI(MPI_Type_contiguous(10, MPI_INT, &s0));
    MT_CHECK_MPI(MPI_Type_create_resized(s0, 0, 48, &t));
    MT_CHECK_MPI(MPI_Type_free(&s0));
    check("resized contiguous", t, 9, 9);
    return mt_finish();
}
