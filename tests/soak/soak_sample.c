#include "soak_sample.h"

#include "mpi_pvar.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>

static long status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            if (sscanf(line + n + 1, "%ld", &v) != 1) v = -1;
            break;
        }
    }
    fclose(f);
    return v;
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') ++n;
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

static int wanted(const char *name)
{
    return strncmp(name, "pml_gpuwire_", 12) == 0 || strncmp(name, "coll_gpuwire_", 13) == 0;
}

void soak_pvars_open(soak_pvars_t *p)
{
    memset(p, 0, sizeof(*p));
    int num = 0;
    if (MPI_T_pvar_get_num(&num) != MPI_SUCCESS) return;
    for (int i = 0; i < num && p->n < SOAK_MAX_PVARS; ++i) {
        char name[256];
        MPI_Datatype type;
        int bind;
        if (!pvar_describe(i, name, sizeof(name), &type, &bind)) continue;
        if (!wanted(name) || type != MPI_UNSIGNED_LONG_LONG || bind != MPI_T_BIND_NO_OBJECT ||
            strlen(name) >= sizeof(p->name[0]))
            continue;
        p->index[p->n] = i;
        memcpy(p->name[p->n], name, strlen(name) + 1);
        p->n++;
    }
    if (p->n == 0 || MPI_T_pvar_session_create(&p->session) != MPI_SUCCESS) {
        p->n = 0;
        return;
    }
    p->started = 1;
    int kept = 0;
    for (int i = 0; i < p->n; ++i) {
        int count = 0;
        MPI_T_pvar_handle h;
        if (MPI_T_pvar_handle_alloc(p->session, p->index[i], NULL, &h, &count) != MPI_SUCCESS ||
            count != 1)
            continue;
        p->index[kept] = p->index[i];
        memmove(p->name[kept], p->name[i], sizeof(p->name[0]));
        p->handle[kept++] = h;
    }
    p->n = kept;
}

void soak_pvars_close(soak_pvars_t *p)
{
    for (int i = 0; i < p->n; ++i) MPI_T_pvar_handle_free(p->session, &p->handle[i]);
    if (p->started) MPI_T_pvar_session_free(&p->session);
    p->n = 0;
    p->started = 0;
}

int soak_pvar_find(const soak_pvars_t *p, const char *name)
{
    for (int i = 0; i < p->n; ++i)
        if (strcmp(p->name[i], name) == 0) return i;
    return -1;
}

void soak_take_sample(const soak_pvars_t *p, soak_sample_t *s)
{
    memset(s, 0, sizeof(*s));
    s->rss_kib = status_kib("VmRSS");
    s->hwm_kib = status_kib("VmHWM");
    s->fds = open_fds();
    for (int i = 0; i < p->n; ++i) {
        unsigned long long v = 0;
        if (MPI_T_pvar_read(p->session, p->handle[i], &v) == MPI_SUCCESS) s->value[i] = v;
    }
}
