/* store_floor: the store's floor per message (issue 23, item 3): the
 * LevelDB writes that one publish to a group of one costs, made as fast as
 * one thread can, with nothing of MQTT or the plugin around them. bench/run
 * sets the plugin's broker CPU per message against plain's plus this.
 *
 * What one message is: the payload chat_bench ingest publishes
 * (make_payload, 200 bytes), turned into its envelope by the plugin's own
 * chat_envelope_build, written by the store's own batch code
 * (ldb_append_floor, the writes of ldb_append: 'M', 'I', 'K' and the
 * sender's 'R', as a publisher that is a member makes them) to a store
 * opened as the plugin opens it (chat_store_open_opts, fsync none or
 * batch; batch asks the sync thread after every write, as the tick does
 * once per pass of the broker's loop, one message per pass here). The
 * envelopes are built beforehand, a ring of 4,096 distinct ones (bodies
 * snappy cannot shrink, as the bench's), so that the plugin's work stays
 * out; each message gets its own cid and id.
 *
 * Usage: store_floor --dir DIR [--fsync none|batch] [--warm-ms N]
 *                    [--dur-ms N] [--no-cid]
 * DIR must not exist yet (a fresh store, as each broker of bench/run gets).
 * Output: one key=value line; cpu_us_per_msg is user + system time of the
 * whole process (LevelDB's compaction and the sync thread included, as the
 * broker's figure counts all its threads) over the messages written in the
 * measured window. Threading: one writing thread (the store starts its
 * own). */
#include "bench.h"
#include "chat_store.h"
#include "ldb_log.h"
#include "plugin.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#define RING 4096u
#define GROUP "room"
#define FROM "pub0"

struct ring_entry {
    char *env; /* the text tpl points into */
    chat_envelope tpl;
};

static uint64_t cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static int usage(void)
{
    fprintf(stderr, "usage: store_floor --dir DIR [--fsync none|batch] [--warm-ms N] "
                    "[--dur-ms N] [--no-cid]\n");
    return 2;
}

/* Writes messages from *n on until deadline_ns; false on a store error. */
static bool write_until(chat_store *st, const struct ring_entry *ring, bool with_cid, bool batch,
                        uint64_t *n, uint64_t deadline_ns)
{
    char cid[64];
    while (bench_now_ns() < deadline_ns) {
        /* A clock read per 64 messages: the loop is what is measured. */
        for (unsigned i = 0; i < 64; i++) {
            uint64_t id = ++*n;
            snprintf(cid, sizeof(cid), FROM "-floor-%" PRIu64, id);
            chat_err rc = ldb_append_floor(st, GROUP, FROM, with_cid ? cid : NULL,
                                           &ring[id % RING].tpl, id, true);
            if (rc == CHAT_OK && batch) {
                rc = chat_store_sync_async(st);
            }
            if (rc != CHAT_OK) {
                fprintf(stderr, "store_floor: message %" PRIu64 ": %s\n", id, chat_strerror(rc));
                return false;
            }
        }
    }
    return true;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *fsync = "none";
    unsigned long warm_ms = 300, dur_ms = 1500;
    bool with_cid = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strcmp(argv[i], "--fsync") && i + 1 < argc) {
            fsync = argv[++i];
        } else if (!strcmp(argv[i], "--warm-ms") && i + 1 < argc) {
            warm_ms = strtoul(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--dur-ms") && i + 1 < argc) {
            dur_ms = strtoul(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--no-cid")) {
            with_cid = false;
        } else {
            return usage();
        }
    }
    if (!dir || (strcmp(fsync, "none") != 0 && strcmp(fsync, "batch") != 0) || dur_ms == 0) {
        return usage();
    }
    struct stat sb;
    if (stat(dir, &sb) == 0) {
        fprintf(stderr, "store_floor: %s exists; it wants a fresh store\n", dir);
        return 2;
    }
    bool batch = strcmp(fsync, "batch") == 0;

    bench_payload_init();
    static struct ring_entry ring[RING];
    char payload[PAYLOAD_BYTES + 1];
    size_t env_bytes = 0;
    for (unsigned i = 0; i < RING; i++) {
        char *cid = NULL;
        size_t len = make_payload(payload, FROM, i + 1, bench_now_ns());
        const char *why =
            chat_envelope_build(payload, len, GROUP, FROM, &ring[i].env, &ring[i].tpl, &cid);
        free(cid);
        if (why) {
            fprintf(stderr, "store_floor: envelope: %s\n", why);
            return 1;
        }
        env_bytes += ring[i].tpl.head_len + ring[i].tpl.mid_len + ring[i].tpl.tail_len;
    }

    chat_store_opts opts = CHAT_STORE_OPTS_INIT;
    opts.sync = batch ? CHAT_SYNC_BATCH : CHAT_SYNC_NONE;
    chat_store *st = NULL;
    char *errmsg = NULL;
    chat_err rc = chat_store_open_opts(dir, &opts, &st, &errmsg);
    if (rc != CHAT_OK) {
        fprintf(stderr, "store_floor: open %s: %s\n", dir, errmsg ? errmsg : chat_strerror(rc));
        free(errmsg);
        return 1;
    }
    uint64_t n = 0;
    int status = 1;
    if (write_until(st, ring, with_cid, batch, &n, bench_now_ns() + warm_ms * 1000000u)) {
        uint64_t n0 = n, c0 = cpu_us(), t0 = bench_now_ns();
        if (write_until(st, ring, with_cid, batch, &n, t0 + dur_ms * 1000000u)) {
            uint64_t c1 = cpu_us(), t1 = bench_now_ns();
            double msgs = (double)(n - n0), secs = (double)(t1 - t0) / 1e9;
            /* The envelope's id and time are filled in by the store: the
             * stored size is the template's plus their digits. */
            printf("fsync=%s cid=%d msgs=%.0f rate=%.0f cpu_us_per_msg=%.3f busy=%.2f "
                   "template_bytes=%.1f\n",
                   fsync, with_cid, msgs, msgs / secs, (double)(c1 - c0) / msgs,
                   (double)(c1 - c0) / 1e6 / secs, (double)env_bytes / RING);
            status = 0;
        }
    }
    chat_store_close(st);
    for (unsigned i = 0; i < RING; i++) {
        free(ring[i].env);
    }
    return status;
}
