/* integ_disk: the helpers of the store's disk tests (integ_disk.h). */
#include "integ_disk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int disk_publish_n(harness_client *c, int n)
{
    char msg[2200];
    int len = snprintf(msg, sizeof msg, "{\"cid\":\"c-%d\",\"body\":\"%0*d\"}", n, 2000, n);
    return harness_client_publish_bytes(c, "chat/room1", msg, (size_t)len, 1, NULL);
}

void disk_expect_storage_error(harness_client *c, int wait_ms)
{
    cJSON *resp = harness_client_response(c, wait_ms);
    const cJSON *e = harness_response_only(resp);
    ASSERTF(strcmp(harness_json_str(e, "error"), "storage error") == 0, "error \"%s\"",
            harness_json_str(e, "error"));
    cJSON_Delete(resp);
}

int disk_publish_until_refused(harness_client *c, int from, int wait_ms)
{
    for (int n = from; n < from + DISK_MAX_PUBLISHES; n++) {
        int rc = disk_publish_n(c, n);
        if (rc == 0x87) {
            disk_expect_storage_error(c, wait_ms);
            return n - from;
        }
        ASSERTF(rc == 0 || rc == 0x10, "publish %d: reason 0x%x", n, (unsigned)rc);
    }
    FAILF("no publish was refused after %d publishes", DISK_MAX_PUBLISHES);
}

int disk_publish_until_accepted(harness_client *c, int n, bool renumber, int timeout_ms,
                                int wait_ms)
{
    int64_t deadline = ts_now_ms() + timeout_ms;
    for (; ts_now_ms() < deadline; n += renumber) {
        int rc = disk_publish_n(c, n);
        if (rc == 0 || rc == 0x10)
            return n;
        ASSERTF(rc == 0x87, "publish %d: reason 0x%x", n, (unsigned)rc);
        disk_expect_storage_error(c, wait_ms);
        ts_sleep_ms(250);
    }
    FAILF("publishing did not resume within %d ms", timeout_ms);
}

void disk_publish_incompressible(harness_client *c, const char *topic, int count, unsigned seed,
                                 int wait_ms)
{
    harness_ticket t;
    char msg[2200];

    srand(seed);
    for (int i = 0; i < count; i++) {
        int n = snprintf(msg, sizeof msg, "{\"body\":\"");
        for (int k = 0; k < 2000; k++)
            msg[n++] = "abcdefghijklmnopqrstuvwxyz0123456789"[rand() % 36];
        snprintf(msg + n, sizeof msg - (size_t)n, "\"}");
        ASSERT(harness_client_publish_async(c, topic, msg, 1, &t) == 0);
    }
    harness_client_wait_acked(c, t, wait_ms);
}

void disk_largest_table(const ts_broker *b, char *out, size_t cap)
{
    ASSERTF(ts_find_file(ts_broker_db_path(b), ".ldb", true, out, cap), "no table file in %s",
            ts_broker_db_path(b));
}

void disk_garble(const char *path)
{
    size_t len = 0;
    char *bytes = ts_read_file(path, &len);
    int fd;

    ASSERT(len > 100000);
    for (size_t i = len / 3; i < len / 3 + 64; i++)
        bytes[i] = (char)~bytes[i];
    fd = open(path, O_WRONLY);
    ASSERTF(fd >= 0, "cannot open %s: %s", path, strerror(errno));
    ASSERTF(pwrite(fd, bytes + len / 3, 64, (off_t)(len / 3)) == 64, "cannot write %s: %s", path,
            strerror(errno));
    ASSERT(close(fd) == 0);
    free(bytes);
}
