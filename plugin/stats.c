/* stats.c: the figures under $SYS/broker/chat/, published like the broker's
 * own $SYS topics (retained, QoS 0, every sys_interval seconds of the
 * broker's configuration, none when it is 0), from the tick, and the same
 * figures for the admin command `stats`.
 *
 * Counting costs a field increment where things happen (chat.c, replay.c,
 * expiry.c) and, per stored message, two reads of the monotonic clock and
 * one bucket increment (chat_stats_write). Everything else runs here, once
 * an interval. */
#include "stats.h"

#include "plugin.h"
#include "push.h"

#include <stdio.h>
#include <string.h>

#define DEFAULT_INTERVAL 10 /* s: the latency interval when no $SYS is published */
#define SYS_PREFIX "$SYS/broker/chat/"

/* The upper bound, in microseconds, of latency bucket b (chat_stats_write). */
static uint64_t bucket_top(unsigned b)
{
    if (b < 16) {
        return b;
    }
    unsigned e = 4 + (b - 16) / 8, sub = (b - 16) % 8;
    return ((8ull + sub + 1) << (e - 3)) - 1;
}

/* The q-th quantile (q in percent) of this interval's appends, 0 when none:
 * the top of the bucket it falls in, so within an eighth above the truth. */
static uint64_t quantile(const struct chat_stats *s, unsigned q)
{
    uint64_t want = (s->nwrites * q + 99) / 100, seen = 0;
    if (s->nwrites == 0) {
        return 0;
    }
    for (unsigned b = 0; b < CHAT_STATS_BUCKETS; b++) {
        seen += s->writes[b];
        if (seen >= want) {
            return bucket_top(b);
        }
    }
    return bucket_top(CHAT_STATS_BUCKETS - 1);
}

/* The figures, in the order they are published and listed. */
struct figure {
    const char *name;
    uint64_t value;
};

#define FIGURES 15

static void collect(struct chat_plugin *pl, struct figure f[FIGURES])
{
    /* The store's own size (chat_store_stats): LevelDB's directory, or
     * the PostgreSQL tables, in the one statement that counts the groups. */
    uint64_t groups = 0, bytes = 0;
    chat_err rc = chat_store_stats(pl->store, &groups, &bytes);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "figures of the store");
    }
    struct figure all[FIGURES] = {
        {"messages/stored", pl->stats.stored},
        {"messages/refused", pl->stats.refused},
        {"acks", pl->stats.acks},
        {"pages/sent", pl->stats.pages},
        {"catchups/active", chat_replay_active(pl)},
        {"catchups/waiting", chat_replay_waiting(pl)},
        {"catchups/turns", chat_replay_turns(pl)},
        {"pages/pass_max_messages", chat_replay_pass_max(pl)},
        {"pages/inflight", chat_replay_inflight(pl)},
        {"groups", groups},
        {"store/bytes", bytes},
        {"store/write/p50_us", pl->stats.p50_us},
        {"store/write/p99_us", pl->stats.p99_us},
        {"devices/expired", pl->stats.expired},
        {"members/expired", pl->stats.expired_members},
    };
    memcpy(f, all, sizeof(all));
}

static void publish(const char *name, uint64_t value, int interval)
{
    char topic[96], text[24];
    int n = snprintf(text, sizeof(text), "%llu", (unsigned long long)value);
    snprintf(topic, sizeof(topic), SYS_PREFIX "%s", name);
    char *payload = mosquitto_malloc((size_t)n + 1);
    mosquitto_property *props = NULL;
    if (!payload) {
        return;
    }
    memcpy(payload, text, (size_t)n + 1);
    /* Like the broker's own, a figure that stops being updated (the plugin
     * unloaded, the broker gone) expires rather than lingering retained. */
    uint32_t expiry = (uint32_t)(interval * 3 > 60 ? interval * 3 : 60);
    if (mosquitto_property_add_int32(&props, MQTT_PROP_MESSAGE_EXPIRY_INTERVAL, expiry) !=
        MOSQ_ERR_SUCCESS) {
        props = NULL;
    }
    if (mosquitto_broker_publish(NULL, topic, n, payload, 0, true, props) != MOSQ_ERR_SUCCESS) {
        mosquitto_free(payload);
        mosquitto_property_free_all(&props);
    }
}

void chat_stats_tick(struct chat_plugin *pl, time_t now)
{
    struct chat_stats *s = &pl->stats;
    int interval = pl->cfg.sys_interval > 0 ? pl->cfg.sys_interval : DEFAULT_INTERVAL;
    if (s->interval_start == 0) {
        s->interval_start = now;
    }
    if (now - s->interval_start >= interval) {
        s->p50_us = quantile(s, 50);
        s->p99_us = quantile(s, 99);
        memset(s->writes, 0, sizeof(s->writes));
        s->nwrites = 0;
        s->interval_start = now;
    }
    /* The first figures go out at the first tick, as the broker's do. */
    if (pl->cfg.sys_interval <= 0 || (s->last_sys && now - s->last_sys < pl->cfg.sys_interval)) {
        return;
    }
    s->last_sys = now;
    struct figure f[FIGURES];
    collect(pl, f);
    for (size_t i = 0; i < FIGURES; i++) {
        publish(f[i].name, f[i].value, pl->cfg.sys_interval);
    }
    const char *names[CHAT_PUSH_FIGURES];
    uint64_t values[CHAT_PUSH_FIGURES];
    size_t n = chat_push_figures(pl, names, values);
    for (size_t i = 0; i < n; i++) {
        publish(names[i], values[i], pl->cfg.sys_interval);
    }
}

void chat_stats_json(struct chat_plugin *pl, sbuf *b)
{
    struct figure f[FIGURES];
    collect(pl, f);
    for (size_t i = 0; i < FIGURES; i++) {
        if (i) {
            sbuf_add(b, ",", 1);
        }
        sbuf_json_str(b, f[i].name);
        sbuf_add(b, ":", 1);
        sbuf_u64(b, f[i].value);
    }
    const char *names[CHAT_PUSH_FIGURES];
    uint64_t values[CHAT_PUSH_FIGURES];
    size_t n = chat_push_figures(pl, names, values);
    for (size_t i = 0; i < n; i++) {
        sbuf_add(b, ",", 1);
        sbuf_json_str(b, names[i]);
        sbuf_add(b, ":", 1);
        sbuf_u64(b, values[i]);
    }
}
