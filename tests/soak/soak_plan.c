#include "soak_plan.h"

#include <math.h>
#include <stdlib.h>

#include "soak_pattern.h"

typedef struct {
    uint64_t s;
} rng_t;

static uint64_t next(rng_t *r)
{
    r->s += 0x9E3779B97F4A7C15ull;
    return soak_mix64(r->s);
}

static unsigned below(rng_t *r, unsigned n) { return (unsigned)(next(r) % n); }

bool soak_is_wildcard(int comm) { return comm >= SC_ANYANY; }

int soak_plan_capacity(const soak_config_t *cfg)
{
    return cfg->nranks * (cfg->per_round + cfg->per_round / 2 + 1);
}

/* Sizes from 0 to max, uniform in log(size + 1): as many messages of 1-2 B
 * as of 0.5-1 MiB. */
static size_t log_uniform(rng_t *r, size_t max)
{
    double u = (double)(next(r) >> 11) * 0x1.0p-53;
    double v = exp2(u * log2((double)max + 1.0)) - 1.0;
    size_t n = (size_t)v;
    return n > max ? max : n;
}

static size_t packed_per_repetition(const soak_layout_t *l)
{
    size_t p = 0;
    for (int i = 0; i < l->nblocks; ++i) p += l->len[i];
    return p;
}

static void gen_msg(const soak_config_t *cfg, rng_t *r, int src, soak_plan_t *plan, soak_msg_t *m)
{
    m->src = src;
    m->dst = (int)below(r, (unsigned)cfg->nranks);
    m->seq = plan->next_seq[src]++;
    m->comm = (unsigned char)below(r, SC_NCOMMS);
    if (cfg->large_share < 1.0 && cfg->small_size < cfg->max_size) {
        const bool large = (double)(next(r) >> 11) * 0x1.0p-53 < cfg->large_share;
        m->size = log_uniform(r, large ? cfg->max_size : cfg->small_size);
    } else {
        m->size = log_uniform(r, cfg->max_size);
    }
    m->shape = (uint32_t)next(r);
    bool wild = soak_is_wildcard(m->comm);
    m->send_kind = cfg->device ? (unsigned char)below(r, SK_NKINDS) : SK_HOST;
    m->recv_kind = cfg->device ? (unsigned char)below(r, SK_NKINDS) : SK_HOST;
    m->dtype = SD_BYTES;
    if (!wild && below(r, 4) == 0) {
        /* Derived datatypes: host buffers only (refused on device memory). */
        m->dtype = (unsigned char)(1 + below(r, SD_NDTYPES - 1));
        m->send_kind = m->recv_kind = SK_HOST;
    }
    m->mode = (unsigned char)below(r, SM_NMODES);
    if (m->mode == SM_BUFFERED) m->send_kind = SK_HOST; /* refused on device memory */
    if (m->mode == SM_READY && wild) m->mode = SM_STANDARD;
    m->recv = (unsigned char)below(r, SR_NRECVS);
    if (m->mode == SM_READY) m->recv = SR_EARLY; /* posted before the handshake */
    m->send_blocking = !wild && below(r, 2) == 0;
    if (m->recv == SR_LATE) m->send_blocking = false;
    if (m->src == m->dst && m->recv != SR_EARLY) m->send_blocking = false;
    m->recv_alt = m->dtype != SD_BYTES && below(r, 2) == 0;
    m->recv_extra = 0;
    if (m->dtype == SD_BYTES && !wild && below(r, 4) == 0) m->recv_extra = (uint16_t)below(r, 256);
    if (m->dtype != SD_BYTES) {
        /* The payload is a whole number of the type's repetitions. */
        soak_layout_t l;
        soak_layout(m, false, &l);
        size_t p = packed_per_repetition(&l);
        m->size = m->size / p * p;
    }
}

bool soak_plan_round(const soak_config_t *cfg, uint64_t round, soak_plan_t *plan)
{
    if (plan->planned >= cfg->messages) return false;
    rng_t r = {soak_mix64(cfg->seed ^ soak_mix64(round + 1))};
    plan->n = 0;
    for (int s = 0; s < cfg->nranks; ++s) {
        uint64_t left = cfg->messages - plan->planned;
        uint64_t n = (uint64_t)(cfg->per_round / 2) + below(&r, (unsigned)cfg->per_round + 1);
        if (n > left) n = left;
        for (uint64_t j = 0; j < n; ++j) {
            soak_msg_t *m = &plan->msgs[plan->n];
            gen_msg(cfg, &r, s, plan, m);
            m->id = plan->n++;
        }
        plan->planned += n;
    }
    return true;
}

/* ---- derived datatypes ------------------------------------------------- */

static void contiguous(soak_layout_t *l, size_t bytes)
{
    l->count = 1;
    l->extent = bytes;
    l->nblocks = 1;
    l->off[0] = 0;
    l->len[0] = bytes;
}

/* Shape of an indexed type: nb blocks of doubles, lengths 1-8, placed in
 * increasing order with gaps of 0-3 doubles, listed in the type map in a
 * shuffled order; extent includes a trailing gap. In doubles. */
static int indexed_shape(uint32_t shape, int *lens, int *disps, int *extent)
{
    rng_t r = {shape};
    int nb = 1 + (int)below(&r, SOAK_MAX_BLOCKS);
    int pos = 0, order[SOAK_MAX_BLOCKS], at[SOAK_MAX_BLOCKS], len[SOAK_MAX_BLOCKS];
    for (int i = 0; i < nb; ++i) {
        pos += (int)below(&r, 4);
        at[i] = pos;
        len[i] = 1 + (int)below(&r, 8);
        pos += len[i];
        order[i] = i;
    }
    *extent = pos + 1 + (int)below(&r, 3);
    for (int i = nb - 1; i > 0; --i) {
        int j = (int)below(&r, (unsigned)i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < nb; ++i) {
        lens[i] = len[order[i]];
        disps[i] = at[order[i]];
    }
    return nb;
}

static void vector_shape(uint32_t shape, int *nb, int *b, int *stride)
{
    rng_t r = {shape};
    *nb = 1 + (int)below(&r, 8);
    *b = 1 + (int)below(&r, 16);
    *stride = *b + 1 + (int)below(&r, 8);
}

static const size_t struct_off[3] = {0, 8, 16}, struct_len[3] = {4, 8, 3};
static const size_t packed_struct_off[3] = {0, 4, 12};

/* The layout of one repetition; count set by the caller. */
static void repetition_layout(const soak_msg_t *m, bool receiver, soak_layout_t *l)
{
    bool alt = receiver && m->recv_alt;
    switch (m->dtype) {
    case SD_VECTOR: {
        int nb, b, s;
        vector_shape(m->shape, &nb, &b, &s);
        if (alt) {
            contiguous(l, (size_t)nb * b * 4);
            return;
        }
        l->nblocks = nb;
        for (int i = 0; i < nb; ++i) {
            l->off[i] = (size_t)i * s * 4;
            l->len[i] = (size_t)b * 4;
        }
        l->extent = (size_t)nb * s * 4;
        return;
    }
    case SD_INDEXED: {
        int lens[SOAK_MAX_BLOCKS], disps[SOAK_MAX_BLOCKS], ext;
        int nb = indexed_shape(m->shape, lens, disps, &ext);
        if (alt) {
            size_t t = 0;
            for (int i = 0; i < nb; ++i) t += (size_t)lens[i] * 8;
            contiguous(l, t);
            return;
        }
        l->nblocks = nb;
        for (int i = 0; i < nb; ++i) {
            l->off[i] = (size_t)disps[i] * 8;
            l->len[i] = (size_t)lens[i] * 8;
        }
        l->extent = (size_t)ext * 8;
        return;
    }
    case SD_STRUCT:
        l->nblocks = 3;
        for (int i = 0; i < 3; ++i) {
            l->off[i] = alt ? packed_struct_off[i] : struct_off[i];
            l->len[i] = struct_len[i];
        }
        l->extent = alt ? 15 : 24;
        return;
    default:
        contiguous(l, m->size);
        return;
    }
}

void soak_layout(const soak_msg_t *m, bool receiver, soak_layout_t *l)
{
    repetition_layout(m, receiver, l);
    if (m->dtype == SD_BYTES) {
        l->count = 1;
        return;
    }
    size_t p = packed_per_repetition(l);
    l->count = (int)(m->size / p);
    if (l->nblocks == 1 && l->off[0] == 0 && l->len[0] == l->extent) {
        /* A contiguous receive of the basic type: one block of everything. */
        contiguous(l, m->size);
    }
}

size_t soak_span(const soak_layout_t *l)
{
    if (l->count <= 0) return 0;
    size_t end = 0;
    for (int i = 0; i < l->nblocks; ++i)
        if (l->off[i] + l->len[i] > end) end = l->off[i] + l->len[i];
    return (size_t)(l->count - 1) * l->extent + end;
}

static int resized(MPI_Datatype t, size_t extent, MPI_Datatype *out)
{
    MPI_Datatype r;
    int rc = MPI_Type_create_resized(t, 0, (MPI_Aint)extent, &r);
    MPI_Type_free(&t);
    if (rc != MPI_SUCCESS) return rc;
    rc = MPI_Type_commit(&r);
    *out = r;
    return rc;
}

int soak_make_type(const soak_msg_t *m, bool receiver, MPI_Datatype *type, int *count)
{
    bool alt = receiver && m->recv_alt;
    soak_layout_t l;
    soak_layout(m, receiver, &l);
    MPI_Datatype t;
    int rc;
    switch (m->dtype) {
    case SD_VECTOR: {
        int nb, b, s;
        vector_shape(m->shape, &nb, &b, &s);
        if (alt) {
            *type = MPI_INT;
            *count = (int)(m->size / 4);
            return MPI_SUCCESS;
        }
        rc = MPI_Type_vector(nb, b, s, MPI_INT, &t);
        if (rc != MPI_SUCCESS) return rc;
        *count = l.count;
        return resized(t, (size_t)nb * s * 4, type);
    }
    case SD_INDEXED: {
        int lens[SOAK_MAX_BLOCKS], disps[SOAK_MAX_BLOCKS], ext;
        int nb = indexed_shape(m->shape, lens, disps, &ext);
        if (alt) {
            *type = MPI_DOUBLE;
            *count = (int)(m->size / 8);
            return MPI_SUCCESS;
        }
        rc = MPI_Type_indexed(nb, lens, disps, MPI_DOUBLE, &t);
        if (rc != MPI_SUCCESS) return rc;
        *count = l.count;
        return resized(t, (size_t)ext * 8, type);
    }
    case SD_STRUCT: {
        int bl[3] = {1, 1, 3};
        MPI_Aint d[3];
        MPI_Datatype ts[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
        for (int i = 0; i < 3; ++i) d[i] = (MPI_Aint)(alt ? packed_struct_off[i] : struct_off[i]);
        rc = MPI_Type_create_struct(3, bl, d, ts, &t);
        if (rc != MPI_SUCCESS) return rc;
        *count = l.count;
        return resized(t, alt ? 15 : 24, type);
    }
    default:
        *type = MPI_BYTE;
        *count = (int)m->size;
        return MPI_SUCCESS;
    }
}

const char *soak_mode_name(int mode)
{
    static const char *n[] = {"standard", "synchronous", "buffered", "ready"};
    return mode >= 0 && mode < SM_NMODES ? n[mode] : "?";
}

const char *soak_dtype_name(int dtype)
{
    static const char *n[] = {"bytes", "vector", "indexed", "struct"};
    return dtype >= 0 && dtype < SD_NDTYPES ? n[dtype] : "?";
}

const char *soak_comm_name(int comm)
{
    static const char *n[] = {"world", "dup", "split", "any-any", "any-source", "any-tag"};
    return comm >= 0 && comm < SC_NCOMMS ? n[comm] : "?";
}

const char *soak_kind_name(int kind)
{
    static const char *n[] = {"host", "device", "managed"};
    return kind >= 0 && kind < SK_NKINDS ? n[kind] : "?";
}
