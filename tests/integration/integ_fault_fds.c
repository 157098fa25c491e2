/* integ_fault_fds: the broker runs out of file descriptors, against the
 * real broker: idle clients hold descriptors and the broker's limit
 * (RLIMIT_NOFILE, as `ulimit -n` or systemd's LimitNOFILE sets it) comes
 * down to what it has open, so that the store then cannot open its next
 * write-ahead log. Publishes are refused with "storage error" (0x87 to
 * MQTT 5) and a log line names the limit; nobody is disconnected. Before the
 * fix the store refused every write until the broker restarted, long after
 * the idle clients had gone. Once they go, publishing resumes by itself,
 * with the next id, and every stored message is there once. Root only (it
 * lowers another process's limit); elsewhere it says why and exits 77 (skipped).
 */
#define _GNU_SOURCE /* prlimit */
#include "integ_disk.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAX_IDLE 200 /* idle clients at most */
#define WAIT_MS 5000

/* Fetches up to limit messages of room1 after id `after` and checks that
 * they are after+1, after+2, ... each with the cid of its message n == id
 * (one publisher, in order), and that there are want of them. */
static void check_run(harness_client *c, int after, int limit, int want)
{
    char req[200];
    cJSON *resp;
    const cJSON *e, *env;
    int k = 0;
    snprintf(req, sizeof req,
             "{\"commands\":[{\"command\":\"fetch\",\"group\":\"room1\",\"after\":%d,"
             "\"limit\":%d}]}",
             after, limit);
    resp = harness_request(c, req, WAIT_MS);
    e = harness_response_only(resp);
    cJSON_ArrayForEach(env, cJSON_GetObjectItemCaseSensitive(e, "messages"))
    {
        char cid[32];
        int64_t id = harness_json_int(env, "id");
        k++;
        snprintf(cid, sizeof cid, "c-%d", after + k);
        ASSERTF(id == after + k, "id %lld where %d was expected", (long long)id, after + k);
        ASSERTF(strcmp(harness_json_str(env, "cid"), cid) == 0, "id %lld has cid %s", (long long)id,
                harness_json_str(env, "cid"));
    }
    ASSERTF(k == want, "%d messages after %d, expected %d", k, after, want);
    cJSON_Delete(resp);
}

/* The highest descriptor number process pid has open, and how many
 * (*count). */
static int fd_max(int pid, int *count)
{
    char path[64];
    struct dirent *de;
    DIR *d;
    int hi = -1;
    *count = 0;
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    if ((d = opendir(path)) == NULL)
        return -1;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        (*count)++;
        if (atoi(de->d_name) > hi)
            hi = atoi(de->d_name);
    }
    closedir(d);
    return hi;
}

int main(void)
{
    harness_client *idle[MAX_IDLE];
    harness_client_opts o = {.client_id = "alice", .mqtt_version = 5};
    ts_broker *b;
    harness_client *alice;
    struct rlimit lim;
    int nidle = 0, stored = 0, n, pid, hi = -2, count = 0;

    ts_init("integ_fault_fds");
    if (geteuid() != 0)
        ts_skip("lowering the broker's descriptor limit needs root");
    b = ts_broker_start(NULL);
    pid = ts_broker_pid(b);
    alice = harness_client_connect_opts(b, &o);
    harness_client_subscribe(alice, HARNESS_RESPONSE_TOPIC, 1);
    /* Forty idle clients, and more until the broker's descriptors are
     * numbered from 0 without a hole; then its limit comes down to what it
     * has open, as if they had taken all it may have. (A limit this low from
     * the start would not do: Debian's build refuses the last connection it
     * can accept through libwrap, which needs descriptors of its own, and so
     * always leaves one free.) */
    while (nidle < MAX_IDLE && (nidle < 40 || (hi = fd_max(pid, &count)) + 1 != count)) {
        char id[32];
        snprintf(id, sizeof id, "idle%d", nidle);
        idle[nidle++] = harness_client_connect(b, id, NULL);
    }
    ASSERTF(hi + 1 == count, "the broker's descriptors have holes: %d open, up to %d", count, hi);
    ASSERT(prlimit(pid, RLIMIT_NOFILE, NULL, &lim) == 0);
    lim.rlim_cur = (rlim_t)count;
    ASSERTF(prlimit(pid, RLIMIT_NOFILE, &lim, NULL) == 0, "prlimit: %s", strerror(errno));
    ts_log("%d idle clients: the broker has %d descriptors open, and now a limit of %d", nidle,
           count, count);

    /* Publish until the store needs a descriptor it cannot have: its next
     * write-ahead log, once the memtable is full. */
    stored = disk_publish_until_refused(alice, 1, WAIT_MS);
    ts_log("refused after %d messages stored", stored);
    ASSERTF(ts_broker_log_count(b, "ran out of file descriptors") == 1,
            "no log line (once) about the descriptors");
    ASSERT(!harness_client_is_lost(alice));
    for (int i = 0; i < nidle; i++)
        ASSERTF(!harness_client_is_lost(idle[i]), "idle client %d was disconnected", i);

    /* The idle clients go, the limit stays: publishing resumes by itself,
     * with the next id. */
    for (int i = 0; i < nidle; i++)
        harness_client_disconnect(idle[i]);
    n = disk_publish_until_accepted(alice, stored + 1, true, 20000, WAIT_MS);
    ASSERT(ts_broker_log_count(b, "publishing resumes") == 1);
    /* Nothing lost, skipped or reused: the first ids, the ids around the
     * refusal, and the head (the whole store would exceed one client's
     * answer budget). The refused messages are not stored: the one that
     * went through is the next id. */
    check_run(alice, 0, 20, 20);
    check_run(alice, stored - 10, 10, 10);
    {
        cJSON *resp = harness_request(
            alice, "{\"commands\":[{\"command\":\"history\",\"group\":\"room1\",\"limit\":1}]}",
            WAIT_MS);
        const cJSON *e = harness_response_only(resp);
        char cid[32];
        snprintf(cid, sizeof cid, "c-%d", n);
        ASSERTF(harness_json_int(e, "head") == stored + 1, "head %lld, expected %d",
                (long long)harness_json_int(e, "head"), stored + 1);
        ASSERTF(strcmp(harness_json_str(
                           cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(e, "messages"), 0),
                           "cid"),
                       cid) == 0,
                "the message after the refusal is not message %d", n);
        cJSON_Delete(resp);
    }
    ts_log("publishing resumed: id %d holds message %d", stored + 1, n);
    harness_client_disconnect(alice);
    ts_broker_stop(b);
    ts_broker_destroy(b);
    return ts_pass();
}
