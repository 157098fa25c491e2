/* load_sys.c: chat_load's clock and logging, and what /proc says of the
 * broker (--pid) and the machine: memory, descriptors, CPU. */
#include "load.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

void note(const char *fmt, ...)
{
    static int64_t t0;
    va_list ap;
    if (t0 == 0)
        t0 = now_ns();
    fprintf(stderr, "chat_load [%7.2fs] ", (double)(now_ns() - t0) / 1e9);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "chat_load: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        die("out of memory");
    return p;
}

/* Resident memory of the broker in KiB, from /proc/<pid>/status; 0 when
 * unknown. */
long rss_kib(void)
{
    char path[64], line[256];
    long kib = 0;
    FILE *f;
    if (g_o.pid <= 0)
        return 0;
    snprintf(path, sizeof path, "/proc/%ld/status", g_o.pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

/* Open descriptors of the broker (entries of /proc/<pid>/fd); -1 when
 * unknown. */
long broker_fds(void)
{
    char path[64];
    struct dirent *de;
    long n = 0;
    DIR *d;
    if (g_o.pid <= 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%ld/fd", g_o.pid);
    if ((d = opendir(path)) == NULL)
        return -1;
    while ((de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

/* CPU seconds (user + system, all threads) of the broker; 0 when unknown. */
double broker_cpu(void)
{
    char path[64], buf[1024];
    unsigned long long ut = 0, st = 0;
    size_t n;
    FILE *f;
    char *p;
    if (g_o.pid <= 0)
        return 0;
    snprintf(path, sizeof path, "/proc/%ld/stat", g_o.pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Fields 14 and 15, counted after the command's closing parenthesis. */
    if ((p = strrchr(buf, ')')) == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds every process of the machine has used (from /proc/stat). */
double machine_cpu(void)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return 0;
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]) != 8) {
        fclose(f);
        return 0;
    }
    fclose(f);
    /* everything but idle (3) and iowait (4) */
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

double self_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

void samples_add(struct samples *s, int64_t x)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        int64_t *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            die("out of memory");
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = x;
}

static int cmp_sample(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t samples_quantile(struct samples *s, double q)
{
    if (s->n == 0)
        return 0;
    qsort(s->v, s->n, sizeof *s->v, cmp_sample);
    size_t rank = (size_t)(q * (double)s->n + 0.999999); /* nearest rank: ceil(q n) */
    if (rank < 1)
        rank = 1;
    if (rank > s->n)
        rank = s->n;
    return s->v[rank - 1];
}

void samples_free(struct samples *s)
{
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}
