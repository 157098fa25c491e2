/* bench_wait: what bench/run asks before a run: a free port (port), a
 * broker that answers (wait), a broker done with its start-up work (idle)
 * and a machine quiet enough to measure on (quiet). */
#include "bench.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------
 * port, wait
 * ------------------------------------------------------------------------- */

int cmd_port(void)
{
    struct sockaddr_in a = {0};
    socklen_t alen = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        perror("chat_bench: socket");
        return 1;
    }
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
        perror("chat_bench: bind 127.0.0.1:0");
        close(fd);
        return 1;
    }
    printf("%d\n", ntohs(a.sin_port));
    close(fd);
    return 0;
}

/* True if something accepts TCP connections on 127.0.0.1:port. */
static bool tcp_probe(int port)
{
    struct sockaddr_in a = {0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        return false;
    }
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return ok;
}

int cmd_wait(const struct opts *o)
{
    uint64_t end = bench_now_ns() + (uint64_t)o->timeout_ms * 1000000ull;
    for (unsigned attempt = 0; attempt < 100000 && bench_now_ns() < end; attempt++) {
        /* Poll the port quietly; once it accepts, the broker must answer MQTT. */
        if (tcp_probe(o->port)) {
            bench_set *s = bench_set_create();
            char id[32];
            snprintf(id, sizeof(id), "bench-wait-%u", attempt);
            bool ok =
                s && bench_set_add(s, id, true, o->port, NULL) && bench_set_wait_connected(s, 2000);
            if (ok) {
                bench_set_disconnect_all(s, 1000);
            }
            bench_set_destroy(s);
            if (ok) {
                printf("ready=1\n");
                return 0;
            }
        }
        struct timespec ts = {0, 20000000L};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "chat_bench: no broker answered on 127.0.0.1:%d\n", o->port);
    return 1;
}

/* Waits until process pid has used at most one clock tick of CPU in each of
 * three consecutive 200 ms windows (LevelDB finishing a compaction after the
 * store was opened, say), or timeout_ms passed. */
int cmd_idle(const struct opts *o)
{
    uint64_t begin = bench_now_ns(), prev = 0, now = 0;
    uint64_t tick_us =
        1000000ull / (uint64_t)(sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100);
    unsigned quiet = 0;

    if (!proc_cpu_us(o->pid, &prev)) {
        fprintf(stderr, "chat_bench: no process %ld\n", o->pid);
        return 1;
    }
    while (quiet < 3 && ms_since(begin) < o->timeout_ms) {
        struct timespec ts = {0, 200000000L};
        nanosleep(&ts, NULL);
        if (!proc_cpu_us(o->pid, &now)) {
            return 1;
        }
        quiet = now - prev <= tick_us ? quiet + 1 : 0;
        prev = now;
    }
    printf("idle=%d waited_ms=%.0f\n", quiet >= 3, ms_since(begin));
    return 0;
}

/* Waits until the machine as a whole kept at most max_busy cores busy in
 * each of two consecutive 250 ms windows, or timeout_ms passed: other work
 * on a shared machine would otherwise land inside a measurement. */
int cmd_quiet(const struct opts *o)
{
    uint64_t begin = bench_now_ns(), prev = 0, now = 0;
    unsigned quiet = 0;
    double busy = 0;

    if (!machine_busy_us(&prev)) {
        return 1;
    }
    while (quiet < 2 && ms_since(begin) < o->timeout_ms) {
        struct timespec ts = {0, 250000000L};
        nanosleep(&ts, NULL);
        if (!machine_busy_us(&now)) {
            return 1;
        }
        busy = (double)(now - prev) / 250000.0;
        quiet = busy <= o->max_busy ? quiet + 1 : 0;
        prev = now;
    }
    printf("quiet=%d waited_ms=%.0f busy=%.2f\n", quiet >= 2, ms_since(begin), busy);
    return 0;
}
