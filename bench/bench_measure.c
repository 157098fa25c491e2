/* bench_measure: the clocks of a measurement: CPU time of the broker, of
 * the whole machine (from /proc) and of ourselves, and quantiles of
 * samples. See bench.h for each function's contract. */
#include "bench.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

double ms_since(uint64_t t0)
{
    return (double)(bench_now_ns() - t0) / 1e6;
}

bool proc_cpu_us(long pid, uint64_t *us)
{
    char path[64], buf[1024];
    unsigned long ut = 0, st = 0;

    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) {
        return false;
    }
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The command name may hold spaces and parentheses: fields start after
     * the last ')'. utime and stime are fields 14 and 15. */
    const char *p = strrchr(buf, ')');
    if (!p ||
        sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) {
        return false;
    }
    long tck = sysconf(_SC_CLK_TCK);
    *us = (uint64_t)(ut + st) * 1000000ull / (uint64_t)(tck > 0 ? tck : 100);
    return true;
}

long proc_rss_kib(long pid)
{
    char path[64], line[256];
    long kib = 0;

    if (pid <= 0) {
        return 0;
    }
    snprintf(path, sizeof(path), "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    if (!f) {
        return 0;
    }
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "VmRSS: %ld", &kib) == 1) {
            break;
        }
    }
    fclose(f);
    return kib;
}

bool machine_busy_us(uint64_t *us)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (!f) {
        return false;
    }
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n != 8) {
        return false;
    }
    long tck = sysconf(_SC_CLK_TCK);
    /* idle (3) and iowait (4) are not busy */
    *us = (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * 1000000ull / (uint64_t)(tck > 0 ? tck : 100);
    return true;
}

uint64_t self_cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_utime.tv_sec * 1000000ull + (uint64_t)ru.ru_utime.tv_usec +
           (uint64_t)ru.ru_stime.tv_sec * 1000000ull + (uint64_t)ru.ru_stime.tv_usec;
}

int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

uint64_t quantile(const uint64_t *v, size_t n, double q)
{
    if (n == 0) {
        return 0;
    }
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

void print_other_util(uint64_t busy_us, uint64_t broker_us, double self_us, double wall_ms)
{
    double other = ((double)busy_us - (double)broker_us - self_us) / 1e3 / wall_ms;

    printf(" other_util=%.2f", other > 0 ? other : 0.0);
}
