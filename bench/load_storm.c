/* load_storm.c: chat_load's traffic (steady at --rate, and the backlog
 * that runs as fast as the slowest online member keeps up), the waits, the
 * measured windows, and the reconnect storm of phases 3 to 6. */
#include "load.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_sent_rr; /* round robin position of the steady traffic */
static int64_t g_rate_t0_ns;
static uint64_t g_rate_sent;
static int64_t g_last_min_ns;

/* ---------------------------------------------------------------------------
 * Senders
 * ------------------------------------------------------------------------- */

static bool publish_to(int group)
{
    struct group *g = &g_groups[group];
    struct client *s = &g_snd[g->sender];
    char topic[40], payload[BODY_BYTES + 96];
    int len;
    if (!s->connected || s->unacked_pubs >= SENDER_WINDOW || g->sent - g->min_online >= LAG_MAX)
        return false;
    snprintf(topic, sizeof topic, "chat/%s", g->name);
    len = snprintf(payload, sizeof payload, "{\"n\":%" PRIu64 ",\"body\":\"%0*d\"}", g->sent + 1,
                   (int)BODY_BYTES, 0);
    if (mosquitto_publish(s->mosq, NULL, topic, len, payload, 1, false) != MOSQ_ERR_SUCCESS)
        return false;
    g->sent++;
    s->unacked_pubs++;
    return true;
}

/* The lowest shown id of each group over its online members that are not
 * catching up: how far the senders may run ahead. */
static void update_min_online(void)
{
    int64_t t = now_ns();
    if (t - g_last_min_ns < 5000000)
        return;
    g_last_min_ns = t;
    for (int k = 0; k < g_o.groups; k++) {
        struct group *g = &g_groups[k];
        uint64_t lo = g->sent;
        for (int m = 0; m < g->nmembers; m++) {
            struct client *d = &g_dev[g->members[m]];
            struct devgroup *dg;
            if (!d->connected || d->catching || (dg = devgroup_of(d, k)) == NULL)
                continue;
            if (dg->shown < lo)
                lo = dg->shown;
        }
        g->min_online = lo;
    }
}

/* Steady traffic: keeps the total published near rate x elapsed time since
 * the traffic (re)started, round robin over the groups. */
static void steady_send(int64_t t)
{
    uint64_t due = (uint64_t)((double)(t - g_rate_t0_ns) / 1e9 * g_o.rate);
    for (int tries = 0; g_rate_sent < due && tries < g_o.groups; tries++) {
        int group = (int)(g_sent_rr++ % (uint64_t)g_o.groups);
        if (publish_to(group))
            g_rate_sent++;
    }
}

static void steady_restart(void)
{
    g_rate_t0_ns = now_ns();
    g_rate_sent = 0;
}

/* Runs passes with steady traffic for ms milliseconds. */
void steady_for(unsigned ms)
{
    int64_t end = now_ns() + (int64_t)ms * 1000000;
    steady_restart();
    for (uint64_t i = 0; now_ns() < end && i < 100000000ull; i++) {
        update_min_online();
        steady_send(now_ns());
        pass(5);
    }
}

/* Every group moves on by n messages, as fast as its members keep up. */
static void backlog_send(unsigned n)
{
    uint64_t want[1024];
    bool done = false;
    for (int k = 0; k < g_o.groups; k++)
        want[k] = g_groups[k].sent + n;
    for (uint64_t i = 0; !done && i < 100000000ull; i++) {
        update_min_online();
        done = true;
        for (int k = 0; k < g_o.groups; k++) {
            for (int b = 0; b < 16 && g_groups[k].sent < want[k]; b++)
                if (!publish_to(k))
                    break;
            done = done && g_groups[k].sent >= want[k];
        }
        pass(done ? 0 : 2);
    }
}

/* ---------------------------------------------------------------------------
 * Waits
 * ------------------------------------------------------------------------- */

bool all_connected(int from, int to, bool subscribed)
{
    for (int i = from; i < to; i++)
        if (!g_dev[i].connected || (subscribed && !g_dev[i].subscribed))
            return false;
    return true;
}

/* Whether every storm device is connected and subscribed again. */
static bool stormers_subscribed(void)
{
    for (int i = 0; i < g_o.devices; i++)
        if (g_dev[i].storm && (!g_dev[i].connected || !g_dev[i].subscribed))
            return false;
    return true;
}

/* Whether device d has shown every message up to each group's target (or,
 * with sent, up to every message published). */
bool caught_up(const struct client *d, bool sent)
{
    for (int j = 0; j < d->ngroups; j++) {
        const struct group *g = &g_groups[d->dg[j].group];
        if (d->dg[j].shown < (sent ? g->sent : g->target))
            return false;
    }
    return true;
}

static bool senders_acked(void)
{
    for (int s = 0; s < g_o.senders; s++)
        if (g_snd[s].unacked_pubs > 0)
            return false;
    return true;
}

/* Waits (passes, no new traffic) until every online device has shown
 * everything published and every sender's publish was acknowledged. */
void drain(const char *what)
{
    for (uint64_t i = 0; i < 100000000ull; i++) {
        bool done = senders_acked();
        for (int k = 0; done && k < g_o.devices; k++)
            done = !g_dev[k].connected || caught_up(&g_dev[k], true);
        if (done)
            return;
        pass(5);
    }
    die("%s: not drained", what);
}

/* ---------------------------------------------------------------------------
 * Measured windows and the storm
 * ------------------------------------------------------------------------- */

/* Starts measuring a window: every probe's gap counts from now. */
void window_start(struct window *w)
{
    samples_free(&w->ping_ns);
    samples_free(&w->gap_ns);
    memset(w, 0, sizeof *w);
    w->start_ns = now_ns();
    w->broker_cpu0 = broker_cpu();
    w->self_cpu0 = self_cpu();
    w->all_cpu0 = machine_cpu();
    g_win = w;
}

void window_ping(struct window *w, int64_t ns)
{
    if (ns > w->max_ping_ns)
        w->max_ping_ns = ns;
    w->pings++;
    w->ping_sum_ns += ns;
    samples_add(&w->ping_ns, ns);
}

void window_end(struct window *w)
{
    int64_t t = now_ns();
    /* A device that got nothing since the last message has a gap too, and
     * a ping sent in the window and not answered yet has taken at least
     * its age: left out, the slowest round trips (a broker stalled at the
     * window's end) would vanish from the max and the p99. */
    for (int i = 0; i < g_nprobes; i++) {
        const struct client *d = g_probes[i];
        int64_t from = d->last_live_ns > w->start_ns ? d->last_live_ns : w->start_ns;
        if (t - from > w->max_gap_ns)
            w->max_gap_ns = t - from;
        samples_add(&w->gap_ns, t - from);
        if (d->ping_mid != 0 && d->ping_sent_ns >= w->start_ns) {
            window_ping(w, t - d->ping_sent_ns);
            w->pings_open++;
        }
    }
    w->end_ns = t;
    w->broker_busy = (broker_cpu() - w->broker_cpu0) / ((double)(t - w->start_ns) / 1e9);
    w->self_busy = (self_cpu() - w->self_cpu0) / ((double)(t - w->start_ns) / 1e9);
    w->other_busy = (machine_cpu() - w->all_cpu0) / ((double)(t - w->start_ns) / 1e9) -
                    w->broker_busy - w->self_busy;
    if (w->other_busy < 0)
        w->other_busy = 0;
    g_win = NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Phases 3 to 6: the storm devices leave, the groups move on, they come
 * back at once and catch up; then steady traffic and a settle. */
void run_storm(int n, struct storm *r, int64_t *caught_at)
{
    int stormers = 0, caught = 0;
    uint64_t shown0 = 0, shown1 = 0;
    int64_t t0;

    memset(r, 0, sizeof *r);
    for (int i = 0; i < g_o.devices; i++) {
        if (!g_dev[i].storm)
            continue;
        g_dev[i].want_closed = true;
        mosquitto_disconnect(g_dev[i].mosq);
        stormers++;
    }
    for (uint64_t i = 0; i < 100000000ull; i++) {
        bool gone = true;
        for (int k = 0; k < g_o.devices && gone; k++)
            gone = !g_dev[k].storm || mosquitto_socket(g_dev[k].mosq) < 0;
        if (gone)
            break;
        pass(5);
    }
    for (int i = 0; i < g_o.devices; i++)
        if (g_dev[i].storm)
            g_dev[i].connected = false;
    backlog_send(g_o.backlog);
    drain("backlog");
    r->rss_offline = rss_kib();
    for (int k = 0; k < g_o.groups; k++)
        g_groups[k].target = g_groups[k].sent;
    note("storm %d: %d devices offline; every group moved on by %u messages; broker %ld KiB", n,
         stormers, g_o.backlog, r->rss_offline);

    /* 4. Steady traffic before the storm. */
    window_start(&r->before);
    steady_for(g_o.steady_ms);
    window_end(&r->before);
    r->rss_before = rss_kib();

    /* 5. Every storm device reconnects at once, or spread over
     * --storm-spread-ms: the j-th of them at j * spread / stormers. A device
     * counts as caught up only once it reconnected (catching). */
    for (int i = 0; i < g_o.devices; i++)
        if (g_dev[i].storm)
            for (int j = 0; j < g_dev[i].ngroups; j++)
                shown0 += g_dev[i].dg[j].shown;
    window_start(&r->during);
    t0 = now_ns();
    r->start_ns = t0;
    int next = 0, back = 0; /* next device to look at; storm devices reconnected */
    int64_t spread_ns = (int64_t)g_o.storm_spread_ms * 1000000;
    steady_restart();
    for (uint64_t i = 0; caught < stormers && i < 100000000ull; i++) {
        int64_t t;
        long rss;
        for (t = now_ns(); next < g_o.devices; next++) {
            if (!g_dev[next].storm)
                continue;
            if (spread_ns > 0 && t - t0 < (int64_t)((double)spread_ns * back / stormers))
                break;
            g_dev[next].catching = true;
            client_connect(&g_dev[next], true);
            back++;
        }
        update_min_online();
        steady_send(now_ns());
        pass(2);
        t = now_ns();
        if (r->subscribed_ns == 0 && stormers_subscribed())
            r->subscribed_ns = t;
        for (int k = 0; k < g_o.devices; k++) {
            struct client *d = &g_dev[k];
            if (d->catching && caught_up(d, false)) {
                d->catching = false;
                d->caught_ns = t;
                caught_at[caught++] = t - t0;
            }
        }
        if ((i & 15) == 0 && (rss = rss_kib()) > r->rss_peak)
            r->rss_peak = rss;
    }
    r->catchup_ns = now_ns() - t0;
    window_end(&r->during);
    if ((rss_kib()) > r->rss_peak)
        r->rss_peak = rss_kib();
    for (int i = 0; i < g_o.devices; i++)
        if (g_dev[i].storm)
            for (int j = 0; j < g_dev[i].ngroups; j++)
                shown1 += g_dev[i].dg[j].shown;
    r->messages = shown1 - shown0;
    qsort(caught_at, (size_t)caught, sizeof *caught_at, cmp_i64);
    r->median_ns = caught ? caught_at[caught / 2] : 0;
    r->max_ns = caught ? caught_at[caught - 1] : 0;
    note("storm %d: %d devices caught up on %" PRIu64 " messages in %.2f s; longest live gap "
         "%.0f ms, longest ping %.1f ms; broker peak %ld KiB",
         n, stormers, r->messages, (double)r->catchup_ns / 1e9, (double)r->during.max_gap_ns / 1e6,
         (double)r->during.max_ping_ns / 1e6, r->rss_peak);

    /* 6. Steady traffic after, everything delivered, and a settle. */
    steady_for(g_o.steady_ms);
    drain("after the storm");
    {
        int64_t end = now_ns() + (int64_t)g_o.settle_ms * 1000000;
        for (uint64_t i = 0; now_ns() < end && i < 100000000ull; i++)
            pass(10);
    }
    r->rss_after = rss_kib();
    note("storm %d: broker %ld KiB after it settled", n, r->rss_after);
}
