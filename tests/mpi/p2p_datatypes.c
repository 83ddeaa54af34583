/* Derived datatypes on both ends of a message: vector, indexed, struct with
 * padding, resized, contiguous of vector, zero counts and zero-size types,
 * and a vector of several MiB (non-contiguous data past the usual
 * rendezvous threshold). The receiver's buffer starts filled with a marker:
 * bytes the type covers must hold the data, bytes in its gaps must keep the
 * marker. Type signatures may differ between the ends as MPI allows (a
 * vector received as contiguous and back). */
#include "p2p.h"

#include <stddef.h>

#define MARK 0xCD

/* Marks in cover[] every byte that count elements of type touch in a buffer
 * that starts at lb (negative lower bounds are not used here). */
static void coverage(MPI_Datatype type, int count, unsigned char *cover, size_t span)
{
    int size;
    MPI_Type_size(type, &size);
    unsigned char *ones = p2p_malloc((size_t)size * count + 1);
    unsigned char *probe = p2p_malloc(span);
    int pos = 0;
    memset(ones, 1, (size_t)size * count);
    memset(probe, 0, span);
    MPI_Unpack(ones, size * count, &pos, probe, count, type, MPI_COMM_SELF);
    memcpy(cover, probe, span);
    free(ones);
    free(probe);
}

/* Sends count elements of stype to the next rank and receives rcount of
 * rtype from the previous one; checks the received bytes against what the
 * sender's type selects, in order, and the gaps. */
static void exchange(const char *what, MPI_Datatype stype, int scount, MPI_Datatype rtype,
                     int rcount, int tag)
{
    MPI_Aint lb, sext, rext;
    int ssize, rsize;
    MPI_Type_get_extent(stype, &lb, &sext);
    MPI_Type_get_extent(rtype, &lb, &rext);
    MPI_Type_size(stype, &ssize);
    MPI_Type_size(rtype, &rsize);
    size_t sspan = (size_t)sext * scount, rspan = (size_t)rext * rcount;
    size_t bytes = (size_t)ssize * scount;
    int before = mt_failures;

    unsigned char *out = p2p_malloc(sspan), *in = p2p_guarded_alloc(rspan, MARK);
    unsigned char *cover = p2p_malloc(rspan), *packed = p2p_malloc(bytes + 1);
    mt_fill(out, sspan, (unsigned)(mt_rank * 31 + tag));
    coverage(rtype, rcount, cover, rspan);

    MPI_Request r;
    MPI_Status st;
    MT_CHECK_MPI(MPI_Irecv(in, rcount, rtype, p2p_prev(), tag, MPI_COMM_WORLD, &r));
    MT_CHECK_MPI(MPI_Send(out, scount, stype, p2p_next(), tag, MPI_COMM_WORLD));
    MT_CHECK_MPI(MPI_Wait(&r, &st));

    MT_CHECK_EQ(st.MPI_SOURCE, p2p_prev());
    MT_CHECK_EQ(st.MPI_TAG, tag);
    int nelem = -1, nbytes = -1;
    MT_CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &nbytes));
    MT_CHECK_EQ(nbytes, bytes);
    MT_CHECK_MPI(MPI_Get_count(&st, rtype, &nelem));
    int expect = rsize == 0 ? 0 : bytes % (size_t)rsize ? MPI_UNDEFINED : (int)(bytes / (size_t)rsize);
    MT_CHECK_EQ(nelem, expect);

    /* What the previous rank sent, in type order: its pattern run through
     * its send type. */
    unsigned char *theirs = p2p_malloc(sspan);
    int pos = 0;
    mt_fill(theirs, sspan, (unsigned)(p2p_prev() * 31 + tag));
    MT_CHECK_MPI(MPI_Pack(theirs, scount, stype, packed, (int)bytes + 1, &pos, MPI_COMM_SELF));
    /* Walk the receive buffer: covered bytes in address order are the type
     * map order for the monotone types used here. */
    size_t next = 0;
    for (size_t i = 0; i < rspan; i++) {
        if (cover[i] && next < bytes) {
            if (in[i] != packed[next]) {
                mt_fail(__FILE__, __LINE__, "byte %zu (data byte %zu) wrong", i, next);
                break;
            }
            next++;
        } else if (in[i] != MARK) {
            /* A gap, or a place the type covers but the message did not fill. */
            mt_fail(__FILE__, __LINE__, "gap byte %zu overwritten", i);
            break;
        }
    }
    P2P_CHECK_GUARDS(in, rspan);
    if (mt_failures != before) fprintf(stderr, "[rank %d]   in %s\n", mt_rank, what);
    free(theirs);
    free(out);
    p2p_guarded_free(in);
    free(cover);
    free(packed);
}

struct rec {
    char c;      /* then padding */
    double d;
    short s[3];  /* then padding */
};

static MPI_Datatype commit(MPI_Datatype t)
{
    MT_CHECK_MPI(MPI_Type_commit(&t));
    return t;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    MPI_Datatype vec, idx, rec, resized, contig_vec, big_vec, zero, contig;

    MT_CHECK_MPI(MPI_Type_vector(100, 3, 5, MPI_INT, &vec));
    vec = commit(vec);
    int bl[5] = {1, 7, 2, 300, 1}, disp[5] = {0, 3, 20, 40, 1000};
    MT_CHECK_MPI(MPI_Type_indexed(5, bl, disp, MPI_DOUBLE, &idx));
    idx = commit(idx);
    int rbl[3] = {1, 1, 3};
    MPI_Aint rdisp[3] = {offsetof(struct rec, c), offsetof(struct rec, d), offsetof(struct rec, s)};
    MPI_Datatype rtypes[3] = {MPI_CHAR, MPI_DOUBLE, MPI_SHORT}, rec0;
    MT_CHECK_MPI(MPI_Type_create_struct(3, rbl, rdisp, rtypes, &rec0));
    /* The extent must be the C struct's, trailing padding included. */
    MT_CHECK_MPI(MPI_Type_create_resized(rec0, 0, sizeof(struct rec), &rec));
    rec = commit(rec);
    MT_CHECK_MPI(MPI_Type_create_resized(MPI_INT, 0, 3 * sizeof(int), &resized));
    resized = commit(resized);
    MT_CHECK_MPI(MPI_Type_contiguous(4, vec, &contig_vec));
    contig_vec = commit(contig_vec);
    /* 6 MiB of doubles, every other one: 3 MiB of data. */
    MT_CHECK_MPI(MPI_Type_vector(384 * 1024, 1, 2, MPI_DOUBLE, &big_vec));
    big_vec = commit(big_vec);
    MT_CHECK_MPI(MPI_Type_contiguous(0, MPI_INT, &zero));
    zero = commit(zero);
    MT_CHECK_MPI(MPI_Type_contiguous(300, MPI_INT, &contig));
    contig = commit(contig);

    int tag = 0;
    exchange("vector", vec, 1, vec, 1, ++tag);
    exchange("vector x 3", vec, 3, vec, 3, ++tag);
    exchange("vector into contiguous", vec, 1, MPI_INT, 300, ++tag);
    exchange("contiguous into vector", contig, 1, vec, 1, ++tag);
    exchange("indexed", idx, 2, idx, 2, ++tag);
    exchange("struct with padding", rec, 50, rec, 50, ++tag);
    exchange("struct into bigger receive", rec, 7, rec, 50, ++tag);
    exchange("resized int (stride 3)", resized, 1000, resized, 1000, ++tag);
    exchange("resized into int", resized, 1000, MPI_INT, 1000, ++tag);
    exchange("contiguous of vector", contig_vec, 2, vec, 8, ++tag);
    exchange("large vector", big_vec, 1, big_vec, 1, ++tag);
    exchange("large vector into contiguous", big_vec, 1, MPI_DOUBLE, 384 * 1024, ++tag);
    exchange("zero count of vector", vec, 0, vec, 1, ++tag);
    exchange("zero-size type", zero, 5, zero, 5, ++tag);
    exchange("zero-size type into int", zero, 3, MPI_INT, 4, ++tag);

    /* A count that is not a whole number of the receive type. */
    {
        int out[7] = {1, 2, 3, 4, 5, 6, 7}, in[9] = {0}, count = 0, elems = 0;
        MPI_Datatype three;
        MPI_Status st;
        MT_CHECK_MPI(MPI_Type_contiguous(3, MPI_INT, &three));
        three = commit(three);
        MT_CHECK_MPI(MPI_Sendrecv(out, 7, MPI_INT, p2p_next(), 99, in, 3, three, p2p_prev(), 99,
                                  MPI_COMM_WORLD, &st));
        MT_CHECK_MPI(MPI_Get_count(&st, three, &count));
        MT_CHECK_EQ(count, MPI_UNDEFINED);
        MT_CHECK_MPI(MPI_Get_elements(&st, three, &elems));
        MT_CHECK_EQ(elems, 7);
        MT_CHECK(in[6] == 7 && in[7] == 0);
        MPI_Type_free(&three);
    }

    MPI_Datatype all[] = {vec, idx, rec, rec0, resized, contig_vec, big_vec, zero, contig};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) MT_CHECK_MPI(MPI_Type_free(&all[i]));
    return mt_finish();
}
