/* Unit tests of the client library's requests (clients/request.c): every
 * sending carries a correlationData never used before and only that
 * sending's answer finds it; what a connection's end, a caller's deadline
 * and a lost answer do to requests. Paho is stubbed (client_stubs below):
 * the publishes are recorded, the connection is a flag. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "clock.h"
#include "request.h"

/* ---------------------------------------------------------------------------
 * Stubs of paho.h: what request.c publishes, and whether it is connected
 * ------------------------------------------------------------------------- */

static bool g_up;
static int g_rc = MQTTASYNC_SUCCESS;
static char *g_last; /* the last payload published */
static int g_published;

bool chat_paho_up(const chat_paho *p)
{
    (void)p;
    return g_up;
}

int chat_paho_publish(chat_paho *p, const char *topic, const void *payload, size_t len, int qos,
                      const struct chat_op *track)
{
    (void)p;
    (void)qos;
    assert_string_equal(topic, CHAT_PROTO_CONTROL_TOPIC);
    assert_null(track); /* answers, not PUBACKs, finish requests */
    if (g_rc != MQTTASYNC_SUCCESS)
        return g_rc;
    free(g_last);
    g_last = strndup(payload, len);
    g_published++;
    return MQTTASYNC_SUCCESS;
}

/* ---------------------------------------------------------------------------
 * Fixture
 * ------------------------------------------------------------------------- */

struct fx {
    struct chat_queue queue;
    chat_notify notify;
    chat_groups groups;
    chat_requests rq;
    struct chat_calls calls;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    struct chat_requests_cfg cfg = {.queue = &f->queue,
                                    .notify = &f->notify,
                                    .groups = &f->groups,
                                    .corr_prefix = "0123456789abcdef",
                                    .timeout_ms = 1000};

    assert_non_null(f);
    assert_true(chat_queue_init(&f->queue));
    f->groups.max_held = 10;
    chat_requests_init(&f->rq, &cfg);
    g_up = true;
    g_rc = MQTTASYNC_SUCCESS;
    g_published = 0;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;

    chat_requests_free(&f->rq);
    chat_calls_finish_all(&f->queue, &f->calls, CHAT_CLIENT_ERR_CLOSED);
    chat_groups_free(&f->groups);
    chat_queue_destroy(&f->queue);
    free(f);
    free(g_last);
    g_last = NULL;
    return 0;
}

/* The correlationData in the last payload published. */
static const char *last_corr(cJSON **root)
{
    cJSON *cmd;

    *root = cJSON_Parse(g_last);
    cmd = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(*root, "commands"), 0);
    return cJSON_GetObjectItemCaseSensitive(cmd, "correlationData")->valuestring;
}

/* A call of op due at deadline. A waited one is the test's to read and
 * free; the queue frees an unwaited one when it is finished. */
static struct call *new_call(enum call_op op, int64_t deadline, bool waited)
{
    struct call *call = chat_call_new(op);

    assert_non_null(call);
    call->waited = waited;
    call->deadline = deadline;
    return call;
}

/* ---------------------------------------------------------------------------
 * Cases
 * ------------------------------------------------------------------------- */

static void test_each_sending_its_own_corr(void **state)
{
    struct fx *f = *state;
    struct chat_request *a, *b;
    cJSON *root;

    a = chat_requests_new(&f->rq, REQ_USER, "join", "room1", "{\"command\":\"join\"}", NULL);
    assert_non_null(a);
    assert_true(a->sent);
    assert_string_equal(last_corr(&root), a->corr);
    cJSON_Delete(root);
    b = chat_requests_new(&f->rq, REQ_USER, "join", "room1", "{\"command\":\"join\"}", NULL);
    assert_string_not_equal(a->corr, b->corr);
    assert_ptr_equal(chat_requests_find(&f->rq, a->corr), a);
    assert_ptr_equal(chat_requests_find(&f->rq, b->corr), b);
    assert_null(chat_requests_find(&f->rq, "0123456789abcdef-r999"));
    assert_int_equal(g_published, 2);
}

static void test_offline_then_connected(void **state)
{
    struct fx *f = *state;
    struct call *call = new_call(CALL_REQUEST, chat_now_ms() + 60000, false);
    struct chat_request *r;
    char old[sizeof r->corr];

    g_up = false;
    r = chat_requests_new(&f->rq, REQ_USER, "fetch", "g", "{\"command\":\"fetch\"}", call);
    assert_false(r->sent);
    assert_int_equal(g_published, 0);
    g_up = true;
    chat_requests_connected(&f->rq);
    assert_true(r->sent);
    snprintf(old, sizeof old, "%s", r->corr);
    /* The connection ends: the caller's request goes again, with a new
     * correlationData; an answer to the old sending finds nothing. */
    chat_requests_connection_ended(&f->rq, &f->calls);
    assert_false(r->sent);
    assert_null(chat_requests_find(&f->rq, old));
    chat_requests_connected(&f->rq);
    assert_string_not_equal(r->corr, old);
    assert_ptr_equal(chat_requests_find(&f->rq, r->corr), r);
    assert_null(chat_requests_find(&f->rq, old));
}

static void test_connection_end_by_kind(void **state)
{
    struct fx *f = *state;
    int64_t later = chat_now_ms() + 60000;
    struct call *flush = new_call(CALL_FLUSH, later, false);
    struct chat_request *user;

    user = chat_requests_new(&f->rq, REQ_USER, "leave", "g", "{\"command\":\"leave\"}",
                             new_call(CALL_REQUEST, later, false));
    assert_non_null(chat_requests_ping(&f->rq, REQ_BARRIER, NULL, flush));
    chat_requests_sync(&f->rq);
    assert_non_null(chat_requests_ping(&f->rq, REQ_PROBE, "g", NULL));
    chat_requests_connection_ended(&f->rq, &f->calls);
    /* The caller's request stays; the flush waits among the calls again;
     * the internal ones are gone. */
    assert_ptr_equal(f->rq.head, user);
    assert_null(user->next);
    assert_ptr_equal(f->calls.head, flush);
}

static void test_caller_deadline(void **state)
{
    struct fx *f = *state;
    int64_t now = chat_now_ms();
    struct call *late = new_call(CALL_REQUEST, now - 1, true);
    struct call *early = new_call(CALL_REQUEST, now + 60000, true);
    struct chat_request *r;
    char corr[sizeof r->corr];

    r = chat_requests_new(&f->rq, REQ_USER, "sync", NULL, "{\"command\":\"sync\"}", late);
    snprintf(corr, sizeof corr, "%s", r->corr);
    (void)chat_requests_new(&f->rq, REQ_USER, "sync", NULL, "{\"command\":\"sync\"}", early);
    chat_requests_expire_calls(&f->rq, now);
    assert_true(late->done);
    assert_int_equal(late->err, CHAT_CLIENT_ERR_TIMEOUT);
    assert_false(early->done);
    /* A late answer to the given-up request matches nothing. */
    assert_null(chat_requests_find(&f->rq, corr));
    chat_call_free(late);
    chat_requests_free(&f->rq);
    assert_true(early->done);
    assert_int_equal(early->err, CHAT_CLIENT_ERR_CLOSED);
    chat_call_free(early);
}

static void test_lost_answer(void **state)
{
    struct fx *f = *state;
    struct chat_request *r, *user;
    int64_t now = chat_now_ms();

    chat_requests_sync(&f->rq);
    user = chat_requests_new(&f->rq, REQ_USER, "sync", NULL, "{\"command\":\"sync\"}",
                             new_call(CALL_REQUEST, now + 60000, false));
    assert_null(chat_requests_take_expired(&f->rq, now));
    /* After request_timeout_ms the internal one is given up; a caller's
     * waits for its own deadline. (The request took its own clock reading,
     * a millisecond or two after now: ask well after.) */
    r = chat_requests_take_expired(&f->rq, now + 1500);
    assert_non_null(r);
    assert_int_equal(r->kind, REQ_SYNC);
    chat_request_free(r);
    assert_null(chat_requests_take_expired(&f->rq, now + 1500));
    assert_ptr_equal(f->rq.head, user);
}

static void test_publish_refused(void **state)
{
    struct fx *f = *state;
    struct chat_request *r;

    g_rc = MQTTASYNC_FAILURE;
    r = chat_requests_new(&f->rq, REQ_USER, "join", "g", "{\"command\":\"join\"}", NULL);
    assert_false(r->sent);
    assert_null(chat_requests_find(&f->rq, r->corr));
}

/* The ping lists no group: its "after" sorts after every group name. */
static void test_ping(void **state)
{
    struct fx *f = *state;
    char longest[CHAT_PROTO_GROUP_MAX + 1];
    cJSON *root, *cmd;
    const char *after;

    assert_non_null(chat_requests_ping(&f->rq, REQ_BARRIER, NULL, NULL));
    root = cJSON_Parse(g_last);
    cmd = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "commands"), 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(cmd, "command")->valuestring, "sync");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(cmd, "replay")));
    after = cJSON_GetObjectItemCaseSensitive(cmd, "after")->valuestring;
    assert_true(chat_proto_utf8_valid(after, strlen(after)));
    assert_null(chat_proto_group_error(after, strlen(after))); /* the greatest name */
    /* Another large name sorts before it (the plugin lists names > after). */
    memset(longest, 0, sizeof longest);
    for (size_t i = 0; i + 4 <= CHAT_PROTO_GROUP_MAX - 4; i += 4)
        memcpy(longest + i, "\xf4\x8f\xbf\xbf", 4);
    memcpy(longest + CHAT_PROTO_GROUP_MAX - 4, "\xf4\x8f\xbf\xbe", 4);
    assert_true(strcmp(longest, after) < 0);
    assert_true(strcmp("\xf4\x8f\xbf\xbf", after) < 0);
    cJSON_Delete(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_each_sending_its_own_corr, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offline_then_connected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_end_by_kind, setup, teardown),
        cmocka_unit_test_setup_teardown(test_caller_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lost_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_publish_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ping, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
