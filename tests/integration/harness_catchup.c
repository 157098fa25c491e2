/* harness_catchup.c: checks over many messages: a device's catch-up in
 * replay pages, the whole store paged through fetch and history, and a
 * group's line in a sync answer. */
#include "harness_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Checks one page of a catch-up against what g expects next; returns whether
 * the group is now complete. */
static bool check_page(harness_client *c, harness_catchup *g, int64_t *next, const harness_page *p,
                       size_t page_size, harness_envelope_fn *fn, void *arg)
{
    const cJSON *env;

    if (p->count < 1 || p->count > page_size)
        harness_fail_json(p->root, "page size out of 1..page_size", NULL);
    if (p->truncated)
        harness_fail_json(p->root, "truncated page, yet nothing was deleted", NULL);
    if (g->head < 0)
        g->head = p->head; /* learnt from the first page */
    ASSERTF(p->head == g->head, "group %s: page says head %lld, expected %lld", g->group,
            (long long)p->head, (long long)g->head);
    ASSERTF(p->first == *next,
            "group %s: page starts at %lld, expected %lld (first %lld last %lld)", g->group,
            (long long)p->first, (long long)*next, (long long)p->first, (long long)p->last);
    cJSON_ArrayForEach(env, p->messages)
    {
        int64_t id = harness_json_int(env, "id");
        ASSERTF(id == *next,
                "group %s: envelope id %lld where %lld was expected: ids must come exactly once, "
                "in order (page first %lld last %lld)",
                g->group, (long long)id, (long long)*next, (long long)p->first, (long long)p->last);
        if (strcmp(harness_json_str(env, "group"), g->group) != 0)
            harness_fail_json(env, "envelope of another group in a page of", g->group);
        if (harness_json_str(env, "from")[0] == '\0')
            harness_fail_json(env, "empty", "from");
        if (harness_json_int(env, "ts") <= 0)
            harness_fail_json(env, "non-positive", "ts");
        if (fn != NULL)
            fn(arg, g->group, env);
        (*next)++;
    }
    ASSERTF(p->last == *next - 1, "group %s: page says last %lld, its envelopes end at %lld",
            g->group, (long long)p->last, (long long)(*next - 1));
    ASSERTF(p->last <= p->head, "group %s: page last %lld above head %lld", g->group,
            (long long)p->last, (long long)p->head);
    ASSERTF(p->more == (p->last < p->head), "group %s: page %lld..%lld of head %lld says more=%s",
            g->group, (long long)p->first, (long long)p->last, (long long)p->head,
            p->more ? "true" : "false");
    g->pages++;
    if (p->count > g->largest)
        g->largest = p->count;
    harness_ack(c, g->group, p->last, 0);
    return p->last == g->head;
}

void harness_catch_up(harness_client *c, harness_catchup *groups, size_t ngroups, size_t page_size,
                      int timeout_ms, harness_envelope_fn *fn, void *arg)
{
    int64_t *next = calloc(ngroups, sizeof *next);
    bool *done = calloc(ngroups, sizeof *done);
    int64_t deadline = ts_now_ms() + timeout_ms;
    size_t remaining = 0;

    if (next == NULL || done == NULL)
        FAILF("out of memory");
    for (size_t i = 0; i < ngroups; i++) {
        next[i] = groups[i].from;
        groups[i].pages = 0;
        groups[i].largest = 0;
        groups[i].head = groups[i].to;
        groups[i].done_ms = 0;
        done[i] = groups[i].to >= 0 && groups[i].from > groups[i].to;
        if (!done[i])
            remaining++;
    }
    for (long iter = 0; remaining > 0 && iter < 100000000L; iter++) {
        int64_t left = deadline - ts_now_ms();
        harness_msg *m;
        harness_page p;
        size_t i;

        if (left <= 0) {
            for (i = 0; i < ngroups; i++)
                if (!done[i])
                    fprintf(stderr, "group %s: next id %lld, expected up to %lld, %zu pages\n",
                            groups[i].group, (long long)next[i], (long long)groups[i].head,
                            groups[i].pages);
            FAILF("client %s: catch-up of %zu group(s) not complete after %d ms", c->id, remaining,
                  timeout_ms);
        }
        if ((m = harness_client_receive(c, (int)left)) == NULL)
            continue;
        if (!harness_page_parse(m, &p))
            FAILF("client %s: during catch-up, unexpected message on %s: %.400s", c->id, m->topic,
                  m->payload);
        for (i = 0; i < ngroups; i++)
            if (strcmp(groups[i].group, p.group) == 0)
                break;
        if (i == ngroups)
            harness_fail_json(p.root, "page of a group this device does not catch up on:", p.group);
        if (done[i])
            harness_fail_json(
                p.root, "page after the catch-up of its group completed (a duplicate?)", p.group);
        ASSERTF(m->qos == groups[i].qos,
                "group %s: page %lld..%lld came with QoS %d, page_qos is %d", p.group,
                (long long)p.first, (long long)p.last, m->qos, groups[i].qos);
        if (check_page(c, &groups[i], &next[i], &p, page_size, fn, arg)) {
            done[i] = true;
            groups[i].done_ms = p.at_ms;
            remaining--;
        }
        harness_page_free(&p);
        harness_msg_free(m);
    }
    /* An ack at QoS 1 after the QoS 0 ones: when the broker acknowledges it,
     * it has applied them all (it reads one connection in order). */
    for (size_t i = 0; i < ngroups; i++)
        if (groups[i].pages > 0)
            harness_ack(c, groups[i].group, groups[i].head, 1);
    harness_expect_quiet(c, "no page after the catch-up completed");
    free(next);
    free(done);
}

/* Checks one fetch or history entry and appends its ids to ids[*n]. */
static void page_ids(const cJSON *entry, const char *command, const char *group, int64_t head,
                     int64_t *ids, size_t max, size_t *n, bool *more)
{
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(entry, "messages");
    const cJSON *env;

    harness_expect_ok(entry, command, group);
    if (!cJSON_IsArray(messages))
        harness_fail_json(entry, "no messages array in", command);
    ASSERTF(harness_json_int(entry, "head") == head, "%s of %s says head %lld, expected %lld",
            command, group, (long long)harness_json_int(entry, "head"), (long long)head);
    *more = harness_json_bool(entry, "more");
    cJSON_ArrayForEach(env, messages)
    {
        if (*n >= max)
            harness_fail_json(entry, "more messages than the head allows in", command);
        if (strcmp(harness_json_str(env, "group"), group) != 0)
            harness_fail_json(env, "envelope of another group in", group);
        ids[(*n)++] = harness_json_int(env, "id");
    }
}

/* Pages through the store as member c, from the start with fetch (forward)
 * or from the head with history, and checks that the pages return ids
 * first..head each once in order (oldest first forward, newest first
 * backward) and say "truncated" exactly where retention deleted messages
 * before first: on the first fetch page (it asked for ids after 0) and on the
 * last history page (it reached the oldest kept). */
static void page_through(harness_client *c, const char *group, int64_t first, int64_t head,
                         bool forward)
{
    const char *command = forward ? "fetch" : "history";
    size_t want = head >= first ? (size_t)(head - first + 1) : 0;
    int64_t *ids = calloc(want + 1, sizeof *ids);
    int64_t from = forward ? 0 : head + 1;
    size_t n = 0;
    bool more = true;
    char req[512];

    if (ids == NULL)
        FAILF("out of memory");
    for (int64_t i = 0; more && i <= head; i++) {
        cJSON *resp;
        const cJSON *entry;
        size_t before = n;
        snprintf(req, sizeof req,
                 "{\"commands\":[{\"command\":\"%s\",\"group\":\"%s\",\"%s\":%lld}]}", command,
                 group, forward ? "after" : "before", (long long)from);
        resp = harness_request(c, req, 5000);
        entry = harness_response_only(resp);
        page_ids(entry, command, group, head, ids, want + 1, &n, &more);
        {
            bool truncated = harness_json_bool(entry, "truncated");
            bool expected = first > 1 && (forward ? i == 0 : !more);
            ASSERTF(truncated == expected, "%s of %s from %lld (oldest kept %lld): truncated is %s",
                    command, group, (long long)from, (long long)first,
                    truncated ? "true" : "false");
        }
        cJSON_Delete(resp);
        ASSERTF(n > before || !more, "%s of %s from %lld: empty page with more=true", command,
                group, (long long)from);
        if (n > before)
            from = ids[n - 1];
    }
    ASSERTF(n == want, "%s of %s returned %zu messages, expected ids %lld..%lld", command, group, n,
            (long long)first, (long long)head);
    for (size_t k = 0; k < n; k++) {
        int64_t id = forward ? first + (int64_t)k : head - (int64_t)k;
        ASSERTF(ids[k] == id, "%s of %s: message %zu has id %lld, expected %lld", command, group, k,
                (long long)ids[k], (long long)id);
    }
    free(ids);
}

void harness_expect_store_from(harness_client *c, const char *group, int64_t first, int64_t head)
{
    page_through(c, group, first, head, true);
    page_through(c, group, first, head, false);
}

void harness_expect_store(harness_client *c, const char *group, int64_t head)
{
    harness_expect_store_from(c, group, 1, head);
}

bool harness_sync_find(const cJSON *entry, const char *group, int64_t *head, int64_t *acked,
                       int64_t *unread)
{
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(entry, "groups");
    const cJSON *g;
    bool found = false;

    harness_expect_ok(entry, "sync", NULL);
    if (!cJSON_IsArray(groups))
        harness_fail_json(entry, "no groups array in", "sync");
    cJSON_ArrayForEach(g, groups)
    {
        if (strcmp(harness_json_str(g, "group"), group) != 0)
            continue;
        if (found)
            harness_fail_json(entry, "sync lists a group twice:", group);
        found = true;
        if (head != NULL)
            *head = harness_json_int(g, "head");
        if (acked != NULL)
            *acked = harness_json_int(g, "acked");
        if (unread != NULL)
            *unread = harness_json_int(g, "unread");
        /* What neither this device received nor its member read (on any
         * device, or by sending it: issue 25, item 6). */
        int64_t seen = harness_json_int(g, "acked");
        if (harness_json_int(g, "read") > seen)
            seen = harness_json_int(g, "read");
        ASSERTF(harness_json_int(g, "unread") == harness_json_int(g, "head") - seen,
                "sync entry of %s: unread is not head - max(acked, read)", group);
    }
    return found;
}
