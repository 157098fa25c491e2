/* load_device.c: chat_load's clients. Devices show each id of a group
 * once and in order and ack as the client library does; libmosquitto's
 * callbacks; and the poll loop that drives every socket from one thread,
 * reading the probes at least every millisecond so that what they measure
 * is the broker's doing. */
#include "load.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

static int64_t g_last_misc_ns; /* keepalive bookkeeping last done */
static int64_t g_last_timers_ns, g_last_probes_ns;

/* ---------------------------------------------------------------------------
 * Showing messages, as the client library does
 * ------------------------------------------------------------------------- */

struct devgroup *devgroup_of(struct client *d, int group)
{
    for (int j = 0; j < d->ngroups; j++)
        if (d->dg[j].group == group)
            return &d->dg[j];
    return NULL;
}

static void send_ack(struct client *d, struct devgroup *dg)
{
    char topic[64], payload[32];
    int len;
    if (!d->connected || dg->shown == dg->acked)
        return;
    snprintf(topic, sizeof topic, "chat/%s/ack", g_groups[dg->group].name);
    len = snprintf(payload, sizeof payload, "%" PRIu64, dg->shown);
    if (mosquitto_publish(d->mosq, NULL, topic, len, payload, 1, false) == MOSQ_ERR_SUCCESS) {
        dg->acked = dg->shown;
        dg->unacked = 0;
        dg->ack_due_ns = 0;
    }
}

static void show(struct client *d, struct devgroup *dg, uint64_t id)
{
    dg->shown = id;
    g_shown++;
    if (g_o.plain) /* no cursor to move: the broker's PUBACKs are libmosquitto's */
        return;
    if (++dg->unacked >= ACK_EVERY)
        send_ack(d, dg);
    else if (dg->ack_due_ns == 0)
        dg->ack_due_ns = now_ns() + ACK_INTERVAL_NS;
}

/* One message of group for device d, live or from a page. */
static void deliver(struct client *d, int group, uint64_t id, uint64_t n)
{
    struct devgroup *dg = devgroup_of(d, group);
    if (!dg) {
        g_errors++;
        return;
    }
    /* Message n of a group must have id n: one sender per group, on one
     * connection, at QoS 1, so the store keeps its order. */
    if (n != id)
        g_misnumbered++;
    if (id <= dg->shown) {
        g_redundant++; /* a page and a live copy of one id: dropped by id */
        return;
    }
    if (id > dg->shown + 1) {
        size_t k = 0;
        while (k < dg->nheld && dg->held[k] < id)
            k++;
        if (k < dg->nheld && dg->held[k] == id) {
            g_redundant++;
            return;
        }
        if (dg->nheld == dg->capheld) {
            size_t cap = dg->capheld ? dg->capheld * 2 : 64;
            uint64_t *h = realloc(dg->held, cap * sizeof *h);
            if (!h)
                die("out of memory");
            dg->held = h;
            dg->capheld = cap;
        }
        memmove(dg->held + k + 1, dg->held + k, (dg->nheld - k) * sizeof *dg->held);
        dg->held[k] = id;
        dg->nheld++;
        return;
    }
    show(d, dg, id);
    while (dg->nheld > 0 && dg->held[0] == dg->shown + 1) {
        show(d, dg, dg->held[0]);
        memmove(dg->held, dg->held + 1, (dg->nheld - 1) * sizeof *dg->held);
        dg->nheld--;
    }
    while (dg->nheld > 0 && dg->held[0] <= dg->shown) {
        /* cannot happen: held ids are above shown + 1 when held */
        g_dup_app++;
        memmove(dg->held, dg->held + 1, (dg->nheld - 1) * sizeof *dg->held);
        dg->nheld--;
    }
}

/* The number after "key": in a JSON text, without parsing all of it. */
static bool json_u64(const char *text, size_t len, const char *key, uint64_t *out)
{
    char pat[32];
    size_t plen = (size_t)snprintf(pat, sizeof pat, "\"%s\":", key);
    for (size_t i = 0; i + plen < len; i++) {
        if (text[i] == '"' && memcmp(text + i, pat, plen) == 0) {
            char *end = NULL;
            const char *p = text + i + plen;
            errno = 0;
            unsigned long long v = strtoull(p, &end, 10);
            if (errno || end == p)
                return false;
            *out = v;
            return true;
        }
    }
    return false;
}

static int group_index(const char *name)
{
    int k;
    if (name[0] != 'g' || sscanf(name + 1, "%d", &k) != 1 || k < 0 || k >= g_o.groups)
        return -1;
    return k;
}

static void on_live(struct client *d, const struct mosquitto_message *msg)
{
    const char *name = msg->topic + 5; /* after "chat/" */
    int group = group_index(name);
    uint64_t id = 0, n = 0;
    int64_t t = now_ns();
    if (group < 0 || !json_u64(msg->payload, (size_t)msg->payloadlen, "n", &n)) {
        g_errors++;
        return;
    }
    /* Plain Mosquitto numbers nothing: the sender's n stands for the id
     * (one sender per group, in order), so that a message its queue
     * delivers twice or not at all counts as with the plugin. */
    if (g_o.plain)
        id = n;
    else if (!json_u64(msg->payload, (size_t)msg->payloadlen, "id", &id)) {
        g_errors++;
        return;
    }
    /* Gaps are measured on the probes, which the poll loop reads at least
     * every millisecond: a gap is then the broker's, not this process's. */
    if (g_win && d->probe && t >= g_win->start_ns) {
        int64_t from = d->last_live_ns > g_win->start_ns ? d->last_live_ns : g_win->start_ns;
        if (t - from > g_win->max_gap_ns)
            g_win->max_gap_ns = t - from;
        samples_add(&g_win->gap_ns, t - from);
    }
    d->last_live_ns = t;
    deliver(d, group, id, n);
}

static void on_page(struct client *d, const struct mosquitto_message *msg)
{
    cJSON *root = cJSON_ParseWithLength(msg->payload, (size_t)msg->payloadlen);
    const cJSON *e, *env;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "responses"))
    {
        const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(e, "command");
        const cJSON *grp = cJSON_GetObjectItemCaseSensitive(e, "group");
        int group;
        if (cJSON_GetObjectItemCaseSensitive(e, "error") != NULL) {
            g_errors++;
            if (g_errors <= 5)
                note("%s: error entry %.*s", d->id, msg->payloadlen > 300 ? 300 : msg->payloadlen,
                     (const char *)msg->payload);
            continue;
        }
        if (!cJSON_IsString(cmd) || strcmp(cmd->valuestring, "replay") != 0 ||
            !cJSON_IsString(grp) || (group = group_index(grp->valuestring)) < 0)
            continue;
        g_pages++;
        cJSON_ArrayForEach(env, cJSON_GetObjectItemCaseSensitive(e, "messages"))
        {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(env, "id");
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(env, "n");
            if (!cJSON_IsNumber(id) || !cJSON_IsNumber(n)) {
                g_errors++;
                continue;
            }
            deliver(d, group, (uint64_t)id->valuedouble, (uint64_t)n->valuedouble);
        }
        /* The ack at the end of each page releases the plugin's window. */
        struct devgroup *dg = devgroup_of(d, group);
        if (dg)
            send_ack(d, dg);
    }
    cJSON_Delete(root);
}

/* ---------------------------------------------------------------------------
 * libmosquitto callbacks
 * ------------------------------------------------------------------------- */

static void subscribe_device(struct client *d)
{
    char *topics[MAX_PER_DEVICE + 1];
    char names[MAX_PER_DEVICE][40];
    topics[0] = (char *)RESPONSE_TOPIC;
    for (int j = 0; j < d->ngroups; j++) {
        snprintf(names[j], sizeof names[j], "chat/%s", g_groups[d->dg[j].group].name);
        topics[j + 1] = names[j];
    }
    /* A subscribe to a group makes the device a member the first time, and
     * starts its catch-up from its cursor every time. */
    if (mosquitto_subscribe_multiple(d->mosq, NULL, d->ngroups + 1, topics, 1, 0, NULL) !=
        MOSQ_ERR_SUCCESS)
        die("%s: subscribe failed", d->id);
}

static void cb_connect(struct mosquitto *mosq, void *obj, int rc)
{
    struct client *c = obj;
    (void)mosq;
    if (rc != 0) {
        note("%s: CONNACK %d (%s)", c->id, rc, mosquitto_connack_string(rc));
        c->closed = true;
        return;
    }
    c->connected = true;
    c->subscribed = false;
    if (c->role == DEVICE)
        subscribe_device(c);
}

static void cb_disconnect(struct mosquitto *mosq, void *obj, int rc)
{
    struct client *c = obj;
    (void)mosq;
    (void)rc;
    if (!c->want_closed)
        g_lost_conn++;
    c->connected = false;
    c->closed = true;
    c->ping_mid = 0;
}

static void cb_subscribe(struct mosquitto *mosq, void *obj, int mid, int count, const int *granted)
{
    struct client *c = obj;
    (void)mosq;
    (void)mid;
    for (int i = 0; i < count; i++)
        if (granted[i] > 2)
            die("%s: a subscription was refused", c->id);
    c->subscribed = true;
}

static void cb_publish(struct mosquitto *mosq, void *obj, int mid)
{
    struct client *c = obj;
    (void)mosq;
    if (c->role == SENDER) {
        if (c->unacked_pubs > 0)
            c->unacked_pubs--;
        return;
    }
    if (c->ping_mid != 0 && mid == c->ping_mid) {
        int64_t rtt = now_ns() - c->ping_sent_ns;
        c->ping_mid = 0;
        /* A ping counts in the window it was sent in; one unanswered at
         * that window's end was counted there (window_end), and its answer
         * after it counts nowhere. */
        if (g_win && c->ping_sent_ns >= g_win->start_ns)
            window_ping(g_win, rtt);
    }
}

static void cb_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *msg)
{
    struct client *c = obj;
    (void)mosq;
    if (c->role != DEVICE)
        return;
    if (strncmp(msg->topic, "chat/", 5) == 0)
        on_live(c, msg);
    else if (strcmp(msg->topic, RESPONSE_TOPIC) == 0)
        on_page(c, msg);
}

/* ---------------------------------------------------------------------------
 * Clients and the poll loop
 * ------------------------------------------------------------------------- */

void client_init(struct client *c, enum role role, int index)
{
    c->role = role;
    c->index = index;
    snprintf(c->id, sizeof c->id, role == DEVICE ? "dev%04d" : "loadsnd%02d", index);
    /* --plain: a device keeps a persistent session, so that plain
     * Mosquitto queues what it misses while offline and sends it on
     * reconnect (its own catch-up, against which the plugin's compares). */
    c->mosq = mosquitto_new(c->id, !(g_o.plain && role == DEVICE), c);
    if (!c->mosq)
        die("mosquitto_new(%s) failed", c->id);
    mosquitto_int_option(c->mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
    mosquitto_int_option(c->mosq, MOSQ_OPT_TCP_NODELAY, 1);
    /* Our own windows bound what is in flight. */
    mosquitto_int_option(c->mosq, MOSQ_OPT_SEND_MAXIMUM, 65535);
    mosquitto_connect_callback_set(c->mosq, cb_connect);
    mosquitto_disconnect_callback_set(c->mosq, cb_disconnect);
    mosquitto_subscribe_callback_set(c->mosq, cb_subscribe);
    mosquitto_publish_callback_set(c->mosq, cb_publish);
    mosquitto_message_callback_set(c->mosq, cb_message);
}

/* Starts a non-blocking connect: the CONNECT goes out when the socket is
 * writable, in the poll loop. A connect refused at once (on loopback the
 * kernel may answer a burst of connects with a reset) is tried again
 * 100 ms later, as a device would, at most 50 times in a row. */
void client_connect(struct client *c, bool again)
{
    int rc;
    c->closed = false;
    c->want_closed = false;
    c->connected = false;
    c->retry_ns = 0;
    c->again = again;
    rc = again ? mosquitto_reconnect_async(c->mosq)
               : mosquitto_connect_async(c->mosq, "127.0.0.1", g_o.port, KEEPALIVE_S);
    if (rc == MOSQ_ERR_ERRNO && errno == ECONNREFUSED && c->refusals < 50) {
        c->refusals++;
        g_refused++;
        c->retry_ns = now_ns() + 100000000ll;
        return;
    }
    if (rc != MOSQ_ERR_SUCCESS)
        die("%s: connect to 127.0.0.1:%d: %s", c->id, g_o.port,
            rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
    c->refusals = 0;
}

static void read_burst(struct client *c)
{
    for (int i = 0; i < READ_BURST; i++) {
        errno = 0;
        int rc = mosquitto_loop_read(c->mosq, 1);
        if (rc != MOSQ_ERR_SUCCESS) {
            if (!c->want_closed && !c->closed)
                note("%s: connection lost: %s", c->id, mosquitto_strerror(rc));
            if (!c->want_closed && !c->closed)
                g_lost_conn++;
            c->connected = false;
            c->closed = true;
            return;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK || mosquitto_socket(c->mosq) < 0)
            return;
    }
}

static void add_fd(size_t *n, struct client *c)
{
    int fd = mosquitto_socket(c->mosq);
    if (fd < 0)
        return;
    g_pfd[*n].fd = fd;
    g_pfd[*n].events = POLLIN;
    if (mosquitto_want_write(c->mosq))
        g_pfd[*n].events |= POLLOUT;
    g_pfd[*n].revents = 0;
    g_owner[(*n)++] = c;
}

/* Due acks, pings and keepalives of every client; at most every 5 ms. */
static void timers(int64_t t)
{
    if (t - g_last_timers_ns < 5000000)
        return;
    g_last_timers_ns = t;
    bool misc = t - g_last_misc_ns > (int64_t)MISC_EVERY_NS;
    if (misc)
        g_last_misc_ns = t;
    for (int i = 0; i < g_o.devices; i++) {
        struct client *d = &g_dev[i];
        if (d->retry_ns != 0 && t >= d->retry_ns)
            client_connect(d, d->again);
        if (!d->connected)
            continue;
        for (int j = 0; j < d->ngroups; j++)
            if (d->dg[j].ack_due_ns != 0 && t >= d->dg[j].ack_due_ns)
                send_ack(d, &d->dg[j]);
        if (d->probe && d->subscribed && d->ping_mid == 0 && t >= d->next_ping_ns) {
            int mid = 0;
            if (mosquitto_publish(d->mosq, &mid, PING_TOPIC, 4, "ping", 1, false) ==
                MOSQ_ERR_SUCCESS) {
                d->ping_mid = mid;
                d->ping_sent_ns = t;
            }
            d->next_ping_ns = t + (int64_t)PING_EVERY_NS;
        }
        if (misc)
            mosquitto_loop_misc(d->mosq);
    }
    for (int s = 0; s < g_o.senders; s++) {
        if (g_snd[s].retry_ns != 0 && t >= g_snd[s].retry_ns)
            client_connect(&g_snd[s], g_snd[s].again);
        if (misc && g_snd[s].connected)
            mosquitto_loop_misc(g_snd[s].mosq);
    }
}

static void handle(struct client *c, short ev)
{
    if (ev & (POLLIN | POLLERR | POLLHUP))
        read_burst(c);
    /* Acks and pages queued by callbacks go out now, not a pass later. */
    if (mosquitto_socket(c->mosq) >= 0 && ((ev & POLLOUT) || mosquitto_want_write(c->mosq))) {
        int rc = mosquitto_loop_write(c->mosq, 1);
        if (rc != MOSQ_ERR_SUCCESS && !c->want_closed && !c->closed) {
            note("%s: write: %s", c->id, mosquitto_strerror(rc));
            g_lost_conn++;
            c->closed = true;
            c->connected = false;
        }
    }
}

/* Reads the probes now if they waited a millisecond: a pass over every
 * socket of a storm can take far longer, and a ping or a live gap would
 * measure this process instead of the broker. */
static void service_probes(void)
{
    int64_t t = now_ns();
    int n = 0;
    if (t - g_last_probes_ns < PROBE_EVERY_NS)
        return;
    g_last_probes_ns = t;
    for (int i = 0; i < g_nprobes; i++) {
        int fd = mosquitto_socket(g_probes[i]->mosq);
        g_probe_pfd[i].fd = fd; /* a negative fd is ignored by poll */
        g_probe_pfd[i].events = POLLIN;
        if (fd >= 0 && mosquitto_want_write(g_probes[i]->mosq))
            g_probe_pfd[i].events |= POLLOUT;
        g_probe_pfd[i].revents = 0;
        n += fd >= 0;
    }
    if (n == 0 || poll(g_probe_pfd, (nfds_t)g_nprobes, 0) <= 0)
        return;
    for (int i = 0; i < g_nprobes; i++)
        if (g_probe_pfd[i].fd >= 0 && g_probe_pfd[i].revents)
            handle(g_probes[i], g_probe_pfd[i].revents);
}

/* One pass: wait at most timeout_ms for socket activity and handle it. */
void pass(int timeout_ms)
{
    size_t n = 0;
    for (int i = 0; i < g_o.devices; i++)
        add_fd(&n, &g_dev[i]);
    for (int s = 0; s < g_o.senders; s++)
        add_fd(&n, &g_snd[s]);
    int r = n ? poll(g_pfd, n, timeout_ms) : 0;
    if (n == 0 && timeout_ms > 0) {
        struct timespec ts = {0, (long)timeout_ms * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (r < 0 && errno != EINTR)
        die("poll: %s", strerror(errno));
    for (size_t k = 0; r > 0 && k < n; k++) {
        if (g_pfd[k].revents && !g_owner[k]->probe)
            handle(g_owner[k], g_pfd[k].revents);
        service_probes();
        /* Acks fall due while a storm's pass reads hundreds of sockets:
         * sent only after the pass, the steady devices' acks left in one
         * burst of 500-650, a load no real fleet sends at once. */
        timers(now_ns());
    }
    g_last_probes_ns = 0;
    service_probes();
    timers(now_ns());
    if (now_ns() > g_deadline_ns)
        die("timed out after %u ms (--timeout-ms)", g_o.timeout_ms);
}
