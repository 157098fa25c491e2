/* bench_catchup: one device comes back and takes what it missed, measured
 * at the broker's edge (catchup: one libmosquitto client that parses pages
 * and acks them as a client would) and inside an application (appcatchup:
 * on the client library, or through mqchat). */
#include "bench.h"

#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "chat_client.h"

/* ---------------------------------------------------------------------------
 * catchup: one device comes back and takes what it missed
 * ------------------------------------------------------------------------- */

struct catchup {
    const struct opts *o;
    char ack_topic[256];
    uint64_t next;   /* id (chat) or n (session) expected next */
    uint64_t unique; /* messages handled, each once */
    uint64_t dups, gaps, pages, bytes;
    uint64_t last_msg; /* when the last message arrived */
    uint64_t t_done;   /* when the expected count was reached */
    bool bad;          /* an error response or unparsable message */
};

static void take_id(struct catchup *cu, uint64_t id)
{
    if (id < cu->next) {
        cu->dups++;
        return;
    }
    if (id > cu->next) {
        cu->gaps += id - cu->next;
    }
    cu->next = id + 1;
    cu->unique++;
    if (cu->unique == cu->o->count && !cu->t_done) {
        cu->t_done = bench_now_ns();
    }
}

/* A replay page (or an error) on the response topic: parse it as a client
 * would, take every message, ack the page's last id. */
static void catchup_page(bench_client *c, struct catchup *cu, const struct mosquitto_message *m)
{
    cJSON *root = cJSON_ParseWithLength(m->payload, (size_t)m->payloadlen);
    cJSON *entry = NULL;
    cJSON *responses = root ? cJSON_GetObjectItemCaseSensitive(root, "responses") : NULL;
    if (!cJSON_IsArray(responses)) {
        fprintf(stderr, "chat_bench: unparsable response: %.200s\n", (const char *)m->payload);
        cu->bad = true;
        goto done;
    }
    cJSON_ArrayForEach(entry, responses)
    {
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(entry, "error");
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(entry, "messages");
        const cJSON *last = cJSON_GetObjectItemCaseSensitive(entry, "last");
        const cJSON *msg = NULL;
        if (err) {
            fprintf(stderr, "chat_bench: error response: %.300s\n", (const char *)m->payload);
            cu->bad = true;
            continue;
        }
        if (!cJSON_IsArray(msgs)) {
            continue;
        }
        cu->pages++;
        cJSON_ArrayForEach(msg, msgs)
        {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
            if (!cJSON_IsNumber(id) || id->valuedouble < 1) {
                cu->bad = true;
                continue;
            }
            take_id(cu, (uint64_t)id->valuedouble);
        }
        if (cJSON_IsNumber(last)) {
            char ack[32];
            int n = snprintf(ack, sizeof(ack), "%" PRIu64, (uint64_t)last->valuedouble);
            bench_client_publish(c, cu->ack_topic, ack, (size_t)n, 1);
        }
    }
done:
    cJSON_Delete(root);
}

static struct catchup *g_catchup;

static void catchup_on_msg(bench_client *c, const struct mosquitto_message *m)
{
    struct catchup *cu = g_catchup;
    if (!strcmp(m->topic, RESPONSE_TOPIC) && is_push(m->payload, (size_t)m->payloadlen)) {
        return;
    }
    cu->last_msg = bench_now_ns();
    cu->bytes += (uint64_t)m->payloadlen;
    if (!strcmp(m->topic, RESPONSE_TOPIC)) {
        catchup_page(c, cu, m);
        return;
    }
    /* A message on chat/<group>: the envelope (chat) or our payload
     * (session). Parse it as a client would. */
    cJSON *root = cJSON_ParseWithLength(m->payload, (size_t)m->payloadlen);
    const cJSON *id =
        cJSON_GetObjectItemCaseSensitive(root, strcmp(cu->o->mode, "chat") ? "n" : "id");
    if (cJSON_IsNumber(id) && id->valuedouble >= 1) {
        take_id(cu, (uint64_t)id->valuedouble);
    } else {
        cu->bad = true;
    }
    cJSON_Delete(root);
}

int cmd_catchup(const struct opts *o)
{
    struct catchup cu = {.o = o, .next = o->first};
    bench_set *s = bench_set_create();
    bool chat = !strcmp(o->mode, "chat");
    char topic[256];
    uint64_t cpu0 = 0, cpu1 = 0;
    bool cpu_ok = o->pid > 0;
    int rc = 1;

    g_catchup = &cu;
    snprintf(topic, sizeof(topic), "chat/%s", o->group);
    snprintf(cu.ack_topic, sizeof(cu.ack_topic), "chat/%s/ack", o->group);
    if (!s) {
        return 1;
    }
    cpu_ok = cpu_ok && proc_cpu_us(o->pid, &cpu0);
    uint64_t self0 = self_cpu_us(), busy0 = 0, busy1 = 0;
    bool busy_ok = machine_busy_us(&busy0);
    /* Both kinds of device are measured as a reconnecting device sees it:
     * from before its CONNECT. A persistent session gets its queue as soon
     * as it connects; a chat device asks for its catch-up with its
     * subscribe, which needs the CONNACK first. (Until issue 23 a chat
     * device's clock started at its subscribe: the plugin's figure left out
     * the round trip of the connect that plain's counted.) */
    uint64_t t_start = bench_now_ns();
    bench_client *dev = bench_set_add(s, o->client ? o->client : "dev0", chat, o->port, NULL);
    if (!dev) {
        goto done;
    }
    dev->on_msg = catchup_on_msg;
    if (!bench_set_wait_connected(s, 5000)) {
        goto done;
    }
    if (chat) {
        if (!bench_client_subscribe(dev, topic, 1)) {
            goto done;
        }
    }
    cu.last_msg = bench_now_ns();
    uint64_t end = t_start + (uint64_t)o->timeout_ms * 1000000ull;
    for (uint64_t pass = 0; pass < 1000000000ull && !cu.t_done; pass++) {
        uint64_t now = bench_now_ns();
        if (now > end || now - cu.last_msg > (uint64_t)o->idle_ms * 1000000ull) {
            break;
        }
        if (bench_set_poll(s, 5) < 0) {
            goto done;
        }
    }
    cpu_ok = cpu_ok && proc_cpu_us(o->pid, &cpu1);
    uint64_t self1 = self_cpu_us();
    busy_ok = busy_ok && machine_busy_us(&busy1);
    double run_ms = ms_since(t_start);
    /* Without the whole count, the run ended on the idle or overall bound:
     * its time is that of the last message handled. */
    uint64_t t_end = cu.t_done ? cu.t_done : cu.last_msg;
    double ms = (double)(t_end - t_start) / 1e6;
    printf("received=%" PRIu64 " complete=%d dups=%" PRIu64 " gaps=%" PRIu64 " pages=%" PRIu64
           " bytes=%" PRIu64 " elapsed_ms=%.1f rate=%.0f bad=%d",
           cu.unique, cu.unique >= o->count, cu.dups, cu.gaps, cu.pages, cu.bytes, ms,
           ms > 0 ? (double)cu.unique / (ms / 1e3) : 0.0, cu.bad);
    if (ms > 0) {
        printf(" bench_util=%.2f", (double)(self1 - self0) / 1e3 / ms);
    }
    if (cpu_ok && cu.unique) {
        printf(" cpu_us_per_msg=%.2f", (double)(cpu1 - cpu0) / (double)cu.unique);
        if (ms > 0) {
            printf(" broker_util=%.2f", (double)(cpu1 - cpu0) / 1e3 / ms);
        }
        if (busy_ok && run_ms > 0) {
            print_other_util(busy1 - busy0, cpu1 - cpu0, (double)(self1 - self0), run_ms);
        }
    }
    printf("\n");
    rc = 0;
done:
    bench_set_close(s, 2000);
    return rc;
}

/* ---------------------------------------------------------------------------
 * appcatchup: the same catch-up into an application on the client library
 * (--via lib: on_message checks ids and the group and reads every byte of
 * the body, as the thinnest application would) or into `mqchat listen -C N`
 * (--via mqchat: its output read from a pipe, every line's id checked).
 * Both keep the library's state file.
 * ------------------------------------------------------------------------- */

struct app {
    uint64_t count;
    const char *group;       /* the group listened to */
    uint64_t sum;            /* of the bytes of every body taken (callback thread only) */
    _Atomic uint64_t next;   /* the id expected next */
    _Atomic uint64_t unique; /* messages taken in order */
    _Atomic uint64_t t_done; /* when the count was reached (ns) */
    _Atomic uint64_t last;   /* when the last message came (ns) */
    atomic_bool bad;
};

/* Has nothing come for longer than idle_ns? last is stored by the client
 * library's thread with a clock read taken before the store: it may be a
 * few ns ahead of a now read here just before it (on a loaded machine, by
 * a preemption), and now - last would then wrap to a huge idle time and end
 * a catch-up in full flow as "incomplete". */
static bool app_idle(uint64_t now, uint64_t last, uint64_t idle_ns)
{
    return now > last && now - last > idle_ns;
}

/* The thinnest application that uses what it is given: it checks the
 * order and the group, and reads every byte of the body (as one that shows
 * or stores it would; summed, so that the reads stay). */
static bool app_on_message(void *arg, const chat_client_message *m)
{
    struct app *a = arg;
    uint64_t now = bench_now_ns(), sum = 0;
    atomic_store(&a->last, now);
    for (const unsigned char *p = (const unsigned char *)m->body; p != NULL && *p != '\0'; p++) {
        sum += *p;
    }
    a->sum += sum;
    if (m->id != atomic_load(&a->next) || strcmp(m->group, a->group) != 0) {
        atomic_store(&a->bad, true);
        return true;
    }
    atomic_store(&a->next, m->id + 1);
    if (atomic_fetch_add(&a->unique, 1) + 1 == a->count) {
        atomic_store(&a->t_done, now);
    }
    return true;
}

/* Reads mqchat's lines "[group #id] from: body" from fd until count lines,
 * EOF or the deadline; checks the ids. */
static void app_read_lines(int fd, struct app *a, uint64_t deadline, uint64_t idle_ns)
{
    static char buf[1 << 16];
    bool at_start = true;
    uint64_t id = 0;
    int in_id = 0; /* 0: before '#', 1: reading digits, 2: done */
    for (uint64_t pass = 0; pass < 100000000ull; pass++) {
        uint64_t now = bench_now_ns();
        if (now > deadline || app_idle(now, atomic_load(&a->last), idle_ns) ||
            atomic_load(&a->unique) >= a->count) {
            return;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 50) <= 0) {
            continue;
        }
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0) {
            return;
        }
        atomic_store(&a->last, bench_now_ns());
        for (ssize_t i = 0; i < n; i++) {
            char ch = buf[i];
            if (at_start) {
                at_start = false;
                in_id = 0;
                id = 0;
            }
            if (ch == '\n') {
                if (in_id == 0 || id != atomic_load(&a->next)) {
                    atomic_store(&a->bad, true);
                } else {
                    atomic_store(&a->next, id + 1);
                    if (atomic_fetch_add(&a->unique, 1) + 1 == a->count) {
                        atomic_store(&a->t_done, bench_now_ns());
                    }
                }
                at_start = true;
            } else if (in_id == 0 && ch == '#') {
                in_id = 1;
            } else if (in_id == 1) {
                if (ch >= '0' && ch <= '9') {
                    id = id * 10 + (uint64_t)(ch - '0');
                } else {
                    in_id = 2;
                }
            }
        }
    }
}

int cmd_appcatchup(const struct opts *o)
{
    struct app a = {.count = o->count, .group = o->group};
    atomic_init(&a.next, o->first);
    atomic_init(&a.unique, 0);
    atomic_init(&a.t_done, 0);
    atomic_init(&a.bad, false);
    const char *client = o->client ? o->client : "dev0";
    uint64_t cpu0 = 0, cpu1 = 0, app0 = 0, busy0 = 0, busy1 = 0;
    bool cpu_ok = o->pid > 0, app_ok = true;
    chat_client *c = NULL;
    pid_t child = -1;
    int rc = 1, fds[2] = {-1, -1};

    if (!o->state) {
        fprintf(stderr, "chat_bench: appcatchup needs --state\n");
        return 2;
    }
    cpu_ok = cpu_ok && proc_cpu_us(o->pid, &cpu0);
    bool busy_ok = machine_busy_us(&busy0);
    uint64_t self0 = self_cpu_us();
    /* Both start the clock before the client exists: the application's
     * start is part of what a user waits for (a few ms of 100,000 messages). */
    uint64_t t_start = bench_now_ns();
    atomic_init(&a.last, t_start);
    uint64_t deadline = t_start + (uint64_t)o->timeout_ms * 1000000ull;
    uint64_t idle_ns = (uint64_t)o->idle_ms * 1000000ull;
    if (!strcmp(o->via, "lib")) {
        chat_client_options co = {0};
        co.port = o->port;
        co.client_id = client;
        co.state_path = o->state;
        co.on_message = app_on_message;
        co.arg = &a;
        chat_client_err err = chat_client_create(&co, &c);
        if (err == CHAT_CLIENT_OK) {
            err = chat_client_connect(c, 5000);
        }
        if (err == CHAT_CLIENT_OK) {
            err = chat_client_listen(c, o->group);
        }
        if (err != CHAT_CLIENT_OK) {
            fprintf(stderr, "chat_bench: chat_client: %s (%s)\n", chat_client_strerror(err),
                    chat_client_reason());
            goto done;
        }
        for (uint64_t i = 0; i < 100000000ull && !atomic_load(&a.t_done); i++) {
            uint64_t now = bench_now_ns();
            if (now > deadline || app_idle(now, atomic_load(&a.last), idle_ns)) {
                break;
            }
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    } else {
        char port[16], count[32];
        snprintf(port, sizeof(port), "%d", o->port);
        snprintf(count, sizeof(count), "%" PRIu64, o->count);
        if (pipe(fds) != 0) {
            goto done;
        }
        child = fork();
        if (child < 0) {
            goto done;
        }
        if (child == 0) {
            dup2(fds[1], STDOUT_FILENO);
            close(fds[0]);
            close(fds[1]);
            execl(o->mqchat, o->mqchat, "-p", port, "-i", client, "--state", o->state, "-C", count,
                  "listen", o->group, (char *)NULL);
            _exit(127);
        }
        close(fds[1]);
        fds[1] = -1;
        app_read_lines(fds[0], &a, deadline, idle_ns);
        app_ok = proc_cpu_us((long)child, &app0);
    }
    cpu_ok = cpu_ok && proc_cpu_us(o->pid, &cpu1);
    busy_ok = busy_ok && machine_busy_us(&busy1);
    uint64_t self1 = self_cpu_us();
    double run_ms = ms_since(t_start);
    uint64_t t_end = atomic_load(&a.t_done) ? atomic_load(&a.t_done) : atomic_load(&a.last);
    double ms = (double)(t_end - t_start) / 1e6;
    uint64_t unique = atomic_load(&a.unique);
    /* The application's CPU: ours (the library's threads run in this
     * process), or mqchat's, plus the reading of its output. */
    double app_us = (double)(self1 - self0) + (app_ok ? (double)app0 : 0.0);
    printf("received=%" PRIu64 " complete=%d elapsed_ms=%.1f rate=%.0f bad=%d", unique,
           unique >= o->count, ms, ms > 0 ? (double)unique / (ms / 1e3) : 0.0,
           (int)atomic_load(&a.bad));
    if (ms > 0) {
        printf(" bench_util=%.2f", app_us / 1e3 / ms);
    }
    if (unique) {
        printf(" client_us_per_msg=%.2f", app_us / (double)unique);
    }
    if (cpu_ok && unique) {
        printf(" cpu_us_per_msg=%.2f", (double)(cpu1 - cpu0) / (double)unique);
        if (ms > 0) {
            printf(" broker_util=%.2f", (double)(cpu1 - cpu0) / 1e3 / ms);
        }
        if (busy_ok && run_ms > 0) {
            print_other_util(busy1 - busy0, cpu1 - cpu0, app_us, run_ms);
        }
    }
    printf("\n");
    rc = 0;
done:
    if (c) {
        chat_client_destroy(c);
    }
    if (child > 0) {
        int st = 0;
        kill(child, SIGTERM);
        for (int i = 0; i < 200 && waitpid(child, &st, WNOHANG) == 0; i++) {
            struct timespec ts = {0, 25000000};
            nanosleep(&ts, NULL);
        }
        if (waitpid(child, &st, WNOHANG) == 0) {
            kill(child, SIGKILL);
            waitpid(child, &st, 0);
        }
    }
    for (int i = 0; i < 2; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    return rc;
}
