/* chat_quiet: the log of one thing's outages, kept short (see
 * chat_quiet.h). */
#include "chat_quiet.h"
#include "chat_mono.h"
#include "store_text.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int64_t mono_ms(void)
{
    return chat_mono_us() / 1000;
}

static void to_stderr(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "%s\n", line);
}

void chat_quiet_init(chat_quiet *q, const char *name, chat_quiet_clock *now, chat_quiet_sink *sink,
                     void *ctx)
{
    memset(q, 0, sizeof(*q));
    q->name = name;
    q->now = now ? now : mono_ms;
    q->sink = sink ? sink : to_stderr;
    q->ctx = sink ? ctx : NULL;
    pthread_mutex_init(&q->mu, NULL);
}

void chat_quiet_destroy(chat_quiet *q)
{
    pthread_mutex_destroy(&q->mu);
}

/* ms as seconds with a tenth, for the lines: "2.4". */
static void put_secs(char out[32], int64_t ms)
{
    snprintf(out, 32, "%" PRId64 ".%d", ms / 1000, (int)(ms % 1000 / 100));
}

/* Under mu: logs line, stamped now. */
static void emit(chat_quiet *q, const char *line, int64_t now)
{
    q->sink(q->ctx, line);
    q->last_line = now;
    q->unlogged = 0;
}

/* Under mu: whether this outage logged text h already; remembers it if
 * not and there is room (rule 2's bound). */
static bool seen_text(chat_quiet *q, uint64_t h)
{
    for (int i = 0; i < q->ntexts; i++) {
        if (q->texts[i] == h) {
            return true;
        }
    }
    if (q->ntexts == CHAT_QUIET_TEXTS) {
        q->hidden++; /* enough told: the rest goes into "still down", counted */
        return true;
    }
    q->texts[q->ntexts++] = h;
    return false;
}

bool chat_quiet_fail(chat_quiet *q, const char *fmt, ...)
{
    char text[CHAT_QUIET_TEXT_MAX], line[CHAT_QUIET_TEXT_MAX + 160], secs[32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    bool logged = true;

    pthread_mutex_lock(&q->mu);
    int64_t now = q->now();
    if (!q->down) {
        q->down = true;
        q->since = now;
        q->attempts = 0;
        q->ntexts = 0;
        q->hidden = 0;
    }
    q->attempts++;
    if (!seen_text(q, store_hash(text, strlen(text)))) {
        store_set_text(line, sizeof(line), "mosquitto-chat: %s", text);
        emit(q, line, now);
    } else if (now - q->last_line >= CHAT_QUIET_EVERY_MS) {
        q->unlogged++; /* this one too: its text is only the "last" */
        put_secs(secs, now - q->since);
        store_set_text(line, sizeof(line),
                       "mosquitto-chat: %s still down after %s s: %" PRIu64
                       " attempts failed, %" PRIu64 " lines not logged (%" PRIu64
                       " with an error not logged before); last: %s",
                       q->name, secs, q->attempts, q->unlogged, q->hidden, text);
        emit(q, line, now);
    } else {
        q->unlogged++;
        logged = false;
    }
    pthread_mutex_unlock(&q->mu);
    return logged;
}

bool chat_quiet_ok(chat_quiet *q)
{
    char line[200], secs[32];
    pthread_mutex_lock(&q->mu);
    bool was_down = q->down;
    if (was_down) {
        int64_t now = q->now();
        put_secs(secs, now - q->since);
        store_set_text(line, sizeof(line),
                       "mosquitto-chat: %s back after %s s (%" PRIu64 " attempts failed, %" PRIu64
                       " lines not logged since the last)",
                       q->name, secs, q->attempts, q->unlogged);
        emit(q, line, now);
        q->down = false;
        q->attempts = 0;
        q->ntexts = 0;
    }
    pthread_mutex_unlock(&q->mu);
    return was_down;
}
