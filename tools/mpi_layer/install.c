/* The layer installed into a running process, without LD_PRELOAD: pml gpuwire
 * opens this library at MPI_Init (pml_gpuwire_mpi_layer) and calls
 * gw_mpi_layer_install(), which points every loaded object's references to
 * the MPI functions this library defines (their GOT slots: the PLT's jump
 * slots and the addresses taken through the GOT) at this library's ones.
 *
 * Open MPI's Fortran bindings (libmpi_mpifh, libmpi_usempi*) call the C
 * functions by their PMPI_ names: there those references are pointed here.
 * Not changed: Open MPI's own libraries and components (their calls stay
 * Open MPI's), gpuwire's libraries, and objects loaded after the call (a
 * module dlopen-ed after MPI_Init keeps Open MPI's functions; preload the
 * library for those). The wrappers reach Open MPI through PMPI_ (looked up in
 * libmpi, never through a GOT), so a patched slot cannot loop back. The walk
 * (dl_iterate_phdr, which holds the loader's lock) only collects the slots;
 * they are resolved (dlsym, dladdr) and changed after it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gw_mpi.h"

#if defined(__x86_64__)
#define GW_R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define GW_R_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define GW_R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define GW_R_GLOB_DAT R_AARCH64_GLOB_DAT
#elif defined(__powerpc64__)
#define GW_R_JUMP_SLOT R_PPC64_JMP_SLOT
#define GW_R_GLOB_DAT R_PPC64_GLOB_DAT
#endif

/* Open MPI's and gpuwire's own objects keep their references. */
static int skipped(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    static const char *const prefixes[] = {"libmpi.so", "libopen-pal", "libopen-rte", "libopen-pmix",
                                           "libpmix", "mca_", "libgpuwire_", "libucp", "libucs",
                                           "libuct", "libucm", "linux-vdso", "ld-linux"};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        if (strncmp(base, prefixes[i], strlen(prefixes[i])) == 0) return 1;
    }
    return 0;
}

/* Where a dynamic entry's address is: glibc relocates most of them in place,
 * some loaders do not. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) v)
{
    return v < info->dlpi_addr ? info->dlpi_addr + v : v;
}

/* Open MPI's Fortran bindings call the C functions by their PMPI_ names. */
static int fortran_bindings(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "libmpi_mpifh", 12) == 0 || strncmp(base, "libmpi_usempi", 13) == 0;
}

/* A GOT slot that refers to an MPI function, found while walking the
 * objects; resolved and changed after the walk (no dlsym or dladdr while
 * dl_iterate_phdr holds the loader's lock). */
typedef struct {
    void **slot;
    const char *name; /* in its object's string table */
    void *to;         /* this library's function of that name, once resolved */
    int object;       /* index into install_t.objects_found */
} slot_t;

typedef struct {
    uintptr_t relro_lo, relro_hi; /* its RELRO pages, empty when none */
    const char *path;
} object_t;

typedef struct {
    void *self;      /* this library's handle (dlopen RTLD_NOLOAD) */
    void *self_base; /* its load address, to skip it */
    slot_t *slots_found;
    size_t nslots, cap_slots;
    object_t *objects_found;
    size_t nobjects, cap_objects;
    int slots;     /* slots pointed here */
    int objects;   /* objects with at least one */
    char why[200]; /* the first failure */
} install_t;

static int push(install_t *in, void **arr, size_t *n, size_t *cap, size_t elem)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        void *p = realloc(*arr, c * elem);
        if (p == NULL) {
            snprintf(in->why, sizeof(in->why), "out of memory");
            return -1;
        }
        *arr = p;
        *cap = c;
    }
    (*n)++;
    return 0;
}

static void find_relocs(install_t *in, const struct dl_phdr_info *info, const ElfW(Rela) *rel,
                        size_t bytes, const ElfW(Sym) *symtab, const char *strtab, int pmpi,
                        int object)
{
    for (size_t i = 0; i < bytes / sizeof(*rel); i++) {
        const unsigned type = ELF64_R_TYPE(rel[i].r_info);
        if (type != GW_R_JUMP_SLOT && type != GW_R_GLOB_DAT) continue;
        const ElfW(Sym) *sym = &symtab[ELF64_R_SYM(rel[i].r_info)];
        const char *name = strtab + sym->st_name;
        /* In the Fortran bindings PMPI_Pack is pointed at MPI_Pack here,
         * which calls libmpi's PMPI_Pack. */
        if (pmpi && strncmp(name, "PMPI_", 5) == 0) name++;
        if (strncmp(name, "MPI", 3) != 0 || (name[3] != '_' && name[3] != 'X')) continue;
        if (push(in, (void **)&in->slots_found, &in->nslots, &in->cap_slots, sizeof(slot_t)) != 0)
            return;
        in->slots_found[in->nslots - 1] =
            (slot_t){(void **)(info->dlpi_addr + rel[i].r_offset), name, NULL, object};
    }
}

static int each_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    install_t *in = arg;
    const char *path = info->dlpi_name;
    if (in->why[0] || (void *)info->dlpi_addr == in->self_base || (path && path[0] && skipped(path)))
        return 0;
    const ElfW(Dyn) *dyn = NULL;
    uintptr_t relro_lo = 0, relro_hi = 0;
    const long page = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
        if (ph->p_type == PT_GNU_RELRO) {
            relro_lo = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)(page - 1);
            relro_hi = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz) & ~(uintptr_t)(page - 1);
        }
    }
    if (dyn == NULL) return 0;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *jmprel = NULL, *rela = NULL;
    size_t jmprel_bytes = 0, rela_bytes = 0;
    int pltrel_rela = 1;
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)dyn_ptr(info, d->d_un.d_ptr); break;
        case DT_STRTAB: strtab = (const char *)dyn_ptr(info, d->d_un.d_ptr); break;
        case DT_JMPREL: jmprel = (const ElfW(Rela) *)dyn_ptr(info, d->d_un.d_ptr); break;
        case DT_PLTRELSZ: jmprel_bytes = d->d_un.d_val; break;
        case DT_RELA: rela = (const ElfW(Rela) *)dyn_ptr(info, d->d_un.d_ptr); break;
        case DT_RELASZ: rela_bytes = d->d_un.d_val; break;
        case DT_PLTREL: pltrel_rela = d->d_un.d_val == DT_RELA; break;
        default: break;
        }
    }
    if (symtab == NULL || strtab == NULL || !pltrel_rela) return 0;
    if (push(in, (void **)&in->objects_found, &in->nobjects, &in->cap_objects, sizeof(object_t)) != 0)
        return 0;
    const int object = (int)in->nobjects - 1;
    in->objects_found[object] = (object_t){relro_lo, relro_hi, path && path[0] ? path : "the program"};
    const int pmpi = path && fortran_bindings(path);
    if (jmprel) find_relocs(in, info, jmprel, jmprel_bytes, symtab, strtab, pmpi, object);
    if (rela) find_relocs(in, info, rela, rela_bytes, symtab, strtab, pmpi, object);
    return 0;
}

/* After the walk: each slot whose name this library defines is pointed at
 * its function. RELRO (the GOT of an object bound at load) is read-only by
 * now: writable for the stores, read-only again; slots outside it are
 * writable. */
static void change_slots(install_t *in)
{
    size_t first = 0;
    while (first < in->nslots) {
        const int obj = in->slots_found[first].object;
        size_t end = first;
        while (end < in->nslots && in->slots_found[end].object == obj) end++;
        int hits = 0;
        for (size_t i = first; i < end; i++) {
            void *to = dlsym(in->self, in->slots_found[i].name);
            Dl_info di;
            /* Only the functions this library defines (dlsym on its handle
             * also searches what it depends on). */
            if (to == NULL || !dladdr(to, &di) || di.dli_fbase != in->self_base) continue;
            in->slots_found[i].to = to;
            hits++;
        }
        const object_t *o = &in->objects_found[obj];
        const int relro = o->relro_hi > o->relro_lo;
        if (hits && relro &&
            mprotect((void *)o->relro_lo, o->relro_hi - o->relro_lo, PROT_READ | PROT_WRITE) != 0) {
            snprintf(in->why, sizeof(in->why), "%s: its GOT cannot be made writable", o->path);
            hits = 0;
        }
        if (hits) {
            for (size_t i = first; i < end; i++) {
                if (in->slots_found[i].to != NULL)
                    __atomic_store_n(in->slots_found[i].slot, in->slots_found[i].to,
                                     __ATOMIC_RELEASE);
            }
            if (relro) mprotect((void *)o->relro_lo, o->relro_hi - o->relro_lo, PROT_READ);
            in->slots += hits;
            in->objects++;
        }
        first = end;
    }
}

/* 0 and the number of slots and objects changed, or -1 with why. */
GW_EXPORT int gw_mpi_layer_install(int *slots, int *objects, char *why, size_t why_len)
{
    *slots = *objects = 0;
#ifndef GW_R_JUMP_SLOT
    snprintf(why, why_len, "this architecture's relocations are not known to the layer");
    return -1;
#else
    install_t in;
    memset(&in, 0, sizeof(in));
    Dl_info me;
    if (!dladdr((void *)gw_mpi_layer_install, &me) || me.dli_fname == NULL) {
        snprintf(why, why_len, "the layer cannot find its own file");
        return -1;
    }
    in.self_base = me.dli_fbase;
    /* Preloaded (this copy or another): the process's MPI functions are a
     * layer's already; nothing to change. */
    Dl_info pack;
    void *fn = dlsym(RTLD_DEFAULT, "MPI_Pack");
    if (fn != NULL && dladdr(fn, &pack) && pack.dli_fname != NULL &&
        strstr(pack.dli_fname, "libgpuwire_") != NULL) {
        return 0;
    }
    in.self = dlopen(me.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (in.self == NULL) {
        snprintf(why, why_len, "the layer cannot open itself: %s", dlerror());
        return -1;
    }
    dl_iterate_phdr(each_object, &in);
    if (!in.why[0]) change_slots(&in);
    free(in.slots_found);
    free(in.objects_found);
    dlclose(in.self); /* the opener's reference keeps it (and it is nodelete) */
    *slots = in.slots;
    *objects = in.objects;
    if (in.why[0]) {
        snprintf(why, why_len, "%s", in.why);
        return -1;
    }
    return 0;
#endif
}
