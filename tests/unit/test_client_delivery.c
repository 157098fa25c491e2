/* Unit tests of the client library's delivery (clients/delivery.c) of
 * recalls and edits (protocol v1.2): on_change gets each change just
 * before on_message gets the message that carries it
 * (change-before-carrier), and a change whose message is still held behind
 * a gap when the change arrives is applied to it first, so that
 * on_message never shows the version it replaced; an edit older than the
 * held version, an edit by another member, and anything done to a
 * tombstone are not applied. Paho is stubbed: nothing is connected, so
 * nothing is published. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "delivery.h"

/* ---------------------------------------------------------------------------
 * Stubs of paho.h: never up, so delivery sends nothing
 * ------------------------------------------------------------------------- */

bool chat_paho_up(const chat_paho *p)
{
    (void)p;
    return false;
}

int chat_paho_publish(chat_paho *p, const char *topic, const void *payload, size_t len, int qos,
                      const struct chat_op *track)
{
    (void)p, (void)topic, (void)payload, (void)len, (void)qos, (void)track;
    fail_msg("published while not connected");
    return 0;
}

int chat_paho_subscribe(chat_paho *p, const char *topic, int qos, const struct chat_op *track)
{
    (void)p, (void)topic, (void)qos, (void)track;
    fail_msg("subscribed while not connected");
    return 0;
}

/* ---------------------------------------------------------------------------
 * What the application got, in order
 * ------------------------------------------------------------------------- */

#define SEEN_MAX 32
struct seen {
    char line[SEEN_MAX][256]; /* "msg <id> <json>" or "change <type> <id> <by> <member> <body>" */
    int n;
};

static bool on_message(void *arg, const chat_client_message *m)
{
    struct seen *s = arg;
    assert_true(s->n < SEEN_MAX);
    snprintf(s->line[s->n++], sizeof s->line[0], "msg %llu r%llu e%llu %s%s %s",
             (unsigned long long)m->id, (unsigned long long)m->recall, (unsigned long long)m->edit,
             m->recalled ? "recalled" : "-", m->edited != 0 ? " edited" : "",
             m->body != NULL ? m->body : "(no body)");
    return true;
}

static void on_change(void *arg, const chat_client_change *ch)
{
    struct seen *s = arg;
    assert_true(s->n < SEEN_MAX);
    snprintf(s->line[s->n++], sizeof s->line[0], "change %s %llu by %llu %s ts %lld %s",
             ch->type == CHAT_CLIENT_RECALLED ? "recalled" : "edited", (unsigned long long)ch->id,
             (unsigned long long)ch->by, ch->member, (long long)ch->ts,
             ch->body != NULL ? ch->body : "-");
}

struct fx {
    chat_groups groups;
    chat_notify notify;
    chat_delivery d;
    struct seen seen;
};

static int setup(void **state)
{
    struct fx *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    fx->groups.max_held = 100;
    struct chat_group *g = chat_groups_get(&fx->groups, "room1");
    assert_non_null(g);
    g->listening = true;
    chat_seq_set_base(&g->seq, 0); /* baseline-first: known, nothing shown */
    struct chat_delivery_cfg cfg = {.groups = &fx->groups,
                                    .notify = &fx->notify,
                                    .prefix = "chat",
                                    .on_message = on_message,
                                    .on_change = on_change,
                                    .arg = &fx->seen,
                                    .ack_every = 1000,
                                    .ack_interval_ms = 100000,
                                    .listen_qos = 1};
    chat_delivery_init(&fx->d, &cfg);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fx *fx = *state;
    chat_groups_free(&fx->groups);
    free(fx);
    return 0;
}

/* One live envelope: {"id":id,"group":"room1","from":from,"ts":ts<rest>}. */
static void live(struct fx *fx, uint64_t id, const char *from, int64_t ts, const char *rest)
{
    char env[512];
    int n =
        snprintf(env, sizeof env, "{\"id\":%llu,\"group\":\"room1\",\"from\":\"%s\",\"ts\":%lld%s}",
                 (unsigned long long)id, from, (long long)ts, rest);
    chat_delivery_live(&fx->d, "room1", env, (size_t)n);
}

static void expect(const struct fx *fx, const char *const *lines, int n)
{
    for (int i = 0; i < n && i < fx->seen.n; i++) {
        assert_string_equal(fx->seen.line[i], lines[i]);
    }
    assert_int_equal(fx->seen.n, n);
}

/* ---------------------------------------------------------------------------
 * Cases
 * ------------------------------------------------------------------------- */

/* In order: each change to on_change, then its message to on_message. */
static void test_change_before_carrier(void **state)
{
    struct fx *fx = *state;
    live(fx, 1, "alice", 100, ",\"body\":\"oops\"");
    live(fx, 2, "alice", 110, ",\"body\":\"tpyo\"");
    live(fx, 3, "alice", 120, ",\"recall\":1");
    live(fx, 4, "alice", 130, ",\"edit\":2,\"body\":\"typo\"");
    static const char *const want[] = {
        "msg 1 r0 e0 - oops",
        "msg 2 r0 e0 - tpyo",
        "change recalled 1 by 3 alice ts 120 -",
        "msg 3 r1 e0 - (no body)",
        "change edited 2 by 4 alice ts 130 typo",
        "msg 4 r0 e2 - typo",
    };
    expect(fx, want, 6);
}

/* A message held behind a gap when its change arrives is shown in its new
 * version: the application never sees what was recalled or replaced. */
static void test_applied_to_held(void **state)
{
    struct fx *fx = *state;
    live(fx, 2, "alice", 110, ",\"body\":\"secret\",\"cid\":\"a-2\"");
    live(fx, 3, "bob", 111, ",\"body\":\"helo\",\"pic\":[1]");
    live(fx, 5, "alice", 130, ",\"recall\":2");
    live(fx, 6, "bob", 140, ",\"edit\":3,\"body\":\"hello\"");
    assert_int_equal(fx->seen.n, 0); /* all held: 1 is missing */
    live(fx, 4, "carol", 120, ",\"body\":\"x\"");
    live(fx, 1, "carol", 100, ",\"body\":\"first\"");
    static const char *const want[] = {
        "msg 1 r0 e0 - first",
        "msg 2 r0 e0 recalled (no body)",
        "msg 3 r0 e0 - edited hello",
        "msg 4 r0 e0 - x",
        "change recalled 2 by 5 alice ts 130 -",
        "msg 5 r2 e0 - (no body)",
        "change edited 3 by 6 bob ts 140 hello",
        "msg 6 r0 e3 - hello",
    };
    expect(fx, want, 8);
}

/* Not applied: an edit older than the held version (a catch-up brings the
 * latest version first), an edit by another member, anything after a
 * recall. Each change still reaches on_change. */
static void test_not_applied(void **state)
{
    struct fx *fx = *state;
    live(fx, 2, "alice", 110, ",\"body\":\"v3\",\"edited\":500");
    live(fx, 3, "alice", 111, ",\"body\":\"mine\"");
    live(fx, 4, "alice", 112, ",\"recalled\":true");
    live(fx, 5, "alice", 300, ",\"edit\":2,\"body\":\"v2\"");
    live(fx, 6, "mallory", 310, ",\"edit\":3,\"body\":\"forged\"");
    live(fx, 7, "alice", 320, ",\"edit\":4,\"body\":\"back\"");
    live(fx, 1, "carol", 100, ",\"body\":\"first\"");
    static const char *const want[] = {
        "msg 1 r0 e0 - first",
        "msg 2 r0 e0 - edited v3",
        "msg 3 r0 e0 - mine",
        "msg 4 r0 e0 recalled (no body)",
        "change edited 2 by 5 alice ts 300 v2",
        "msg 5 r0 e2 - v2",
        "change edited 3 by 6 mallory ts 310 forged",
        "msg 6 r0 e3 - forged",
        "change edited 4 by 7 alice ts 320 back",
        "msg 7 r0 e4 - back",
    };
    expect(fx, want, 10);
}

/* recall-complete: a catch-up brings the carriers of N's edits that N's
 * recall rewrote (recalled edits) before the recall itself: the first of
 * them recalls the held N, as the recall would. An edit lists its carrier
 * in N's "edits", and an edit N's list already names is not applied again
 * (a catch-up brings N's latest version before the Ms that made it). */
static void test_recalled_edit(void **state)
{
    struct fx *fx = *state;
    live(fx, 2, "alice", 100, ",\"body\":\"secret\",\"cid\":\"a-2\"");
    live(fx, 3, "alice", 110, ",\"edit\":2,\"recalled\":true");
    live(fx, 4, "alice", 120, ",\"recall\":2");
    live(fx, 5, "alice", 130, ",\"body\":\"v3\",\"edited\":150,\"edits\":[6,7]");
    live(fx, 6, "alice", 140, ",\"edit\":5,\"body\":\"v2\"");
    live(fx, 7, "alice", 150, ",\"edit\":5,\"body\":\"v3 again\"");
    assert_int_equal(fx->seen.n, 0); /* all held: 1 is missing */
    live(fx, 1, "bob", 90, ",\"body\":\"x\"");
    /* 5 shows v3: 7 (at the same time as 5's "edited") is listed in 5's
     * "edits", so not applied again */
    static const char *const want[] = {
        "msg 1 r0 e0 - x",
        "msg 2 r0 e0 recalled (no body)",
        "change recalled 2 by 3 alice ts 110 -",
        "msg 3 r0 e2 recalled (no body)",
        "change recalled 2 by 4 alice ts 120 -",
        "msg 4 r2 e0 - (no body)",
        "msg 5 r0 e0 - edited v3",
        "change edited 5 by 6 alice ts 140 v2",
        "msg 6 r0 e5 - v2",
        "change edited 5 by 7 alice ts 150 v3 again",
        "msg 7 r0 e5 - v3 again",
    };
    expect(fx, want, 11);
}

/* The envelope reader: a change's fields in both its ways (the scanner,
 * and cJSON for what the scanner leaves to it). */
static void test_reader(void **state)
{
    struct fx *fx = *state;
    /* an escape in a string sends it to cJSON; the change fields as well */
    live(fx, 1, "alice", 100, ",\"body\":\"caf\\u00e9\",\"edited\":77");
    live(fx, 2, "alice", 101, ",\"recall\":1");
    /* not the plugin's shapes: read as absent */
    live(fx, 3, "alice", 102, ",\"body\":\"b\",\"recall\":\"1\"");
    live(fx, 4, "alice", 103, ",\"body\":\"b\",\"recalled\":1");
    static const char *const want[] = {
        "msg 1 r0 e0 - edited caf\xc3\xa9",
        "change recalled 1 by 2 alice ts 101 -",
        "msg 2 r1 e0 - (no body)",
        "msg 3 r0 e0 - b",
        "msg 4 r0 e0 - b",
    };
    expect(fx, want, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_change_before_carrier, setup, teardown),
        cmocka_unit_test_setup_teardown(test_applied_to_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_applied, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recalled_edit, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
