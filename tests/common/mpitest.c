#include "mpitest.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>

int mt_failures = 0;
int mt_rank = -1;
int mt_size = 0;

void mt_init(int *argc, char ***argv, int required)
{
    int provided = 0;
    if (MPI_Init_thread(argc, argv, required, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "MPI_Init_thread failed\n");
        exit(1);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided < required) {
        mt_fail(__FILE__, __LINE__, "thread level %d asked, %d provided", required, provided);
    }
}

void mt_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[rank %d] %s:%d: ", mt_rank, file, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    fflush(stderr);
    va_end(ap);
    mt_failures++;
}

int mt_finish(void)
{
    int total = 0;
    MPI_Allreduce(&mt_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (mt_rank == 0) {
        printf("%s: %d failure(s) on %d rank(s)\n", total ? "FAIL" : "PASS", total, mt_size);
        fflush(stdout);
    }
    MPI_Finalize();
    return total ? 1 : 0;
}

int mt_skip(const char *reason)
{
    if (mt_rank <= 0) {
        printf("SKIP: %s\n", reason);
        fflush(stdout);
    }
    MPI_Finalize();
    return 77;
}

static inline unsigned char mt_pattern(unsigned seed, size_t i)
{
    uint32_t x = (uint32_t)(seed * 2654435761u) ^ (uint32_t)(i * 40503u) ^ (uint32_t)(i >> 8);
    return (unsigned char)(x ^ (x >> 13) ^ (x >> 24));
}

void mt_fill(void *buf, size_t len, unsigned seed)
{
    unsigned char *p = (unsigned char *)buf;
    for (size_t i = 0; i < len; i++) p[i] = mt_pattern(seed, i);
}

long mt_check_fill(const void *buf, size_t len, unsigned seed)
{
    const unsigned char *p = (const unsigned char *)buf;
    for (size_t i = 0; i < len; i++) {
        if (p[i] != mt_pattern(seed, i)) return (long)i;
    }
    return -1;
}
