/* integ_bad.c: the fixture of the bad-input tests (integ_bad.h). */
#include "integ_bad.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const actor_names[ACTORS] = {"bob", "bob5", "eve", "eve5", "anon"};

/* ===========================================================================
 * Fixture
 * ========================================================================= */

static harness_client *connect_as(fixture *fx, const char *id, const char *user, int version)
{
    harness_client_opts o = {.client_id = id, .username = user, .mqtt_version = version};

    return harness_client_connect_opts(fx->b, &o);
}

/* See integ_bad.h. */
bool bad_on_room(const harness_msg *m, void *arg)
{
    (void)arg;
    return strcmp(m->topic, TOPIC) == 0;
}

void bad_carol_expects(fixture *fx, int64_t id, const char *body)
{
    harness_msg *m = harness_client_receive_if(fx->carol, bad_on_room, NULL, WAIT_MS);
    cJSON *env;

    ASSERTF(m != NULL, "carol: no message on %s within %d ms (expected id %lld)", TOPIC, WAIT_MS,
            (long long)id);
    env = harness_json_object(m);
    ASSERTF(harness_json_int(env, "id") == id && strcmp(harness_json_str(env, "body"), body) == 0,
            "carol: expected id %lld \"%s\", got %.300s", (long long)id, body, m->payload);
    cJSON_Delete(env);
    harness_msg_free(m);
}

/* Alice sends one message; carol must get it as the next id. */
void bad_alice_sends(fixture *fx, const char *label)
{
    char cid[32], body[200];
    cJSON *msg = cJSON_CreateObject();
    char *payload;

    snprintf(body, sizeof body, "alice %d after %s", ++fx->sent, label);
    snprintf(cid, sizeof cid, "alice-%d", fx->sent);
    if (msg == NULL || cJSON_AddStringToObject(msg, "body", body) == NULL ||
        cJSON_AddStringToObject(msg, "cid", cid) == NULL ||
        (payload = cJSON_PrintUnformatted(msg)) == NULL)
        FAILF("out of memory");
    harness_client_publish(fx->alice, TOPIC, payload, 1);
    cJSON_free(payload);
    cJSON_Delete(msg);
    fx->head++;
    bad_carol_expects(fx, fx->head, body);
}

static void join(harness_client *by, const char *member)
{
    char req[256];
    cJSON *resp;

    snprintf(req, sizeof req,
             "{\"commands\":[{\"command\":\"join\",\"group\":\"" GROUP "\",\"member\":\"%s\"}]}",
             member);
    resp = harness_request(by, req, WAIT_MS);
    harness_expect_ok(harness_response_only(resp), "join", GROUP);
    cJSON_Delete(resp);
}

/* Starts the broker with opts and the clients; closed: open_groups false,
 * where admin adds the members. */
void bad_setup(fixture *fx, const char *const *opts, bool closed, bool with_eve)
{
    static const char *const closed_opts[] = {"open_groups false", "admins admin", NULL};

    fx->closed = closed;
    fx->b = closed ? ts_broker_start_users(closed_opts) : ts_broker_start(opts);
    if (closed) {
        fx->admin = connect_as(fx, "admin", "admin", 4);
        join(fx->admin, "alice");
        join(fx->admin, "carol");
        join(fx->admin, "bob");
        join(fx->admin, "bob5");
    }
    fx->carol = connect_as(fx, "carol", "carol", 4);
    harness_client_subscribe(fx->carol, TOPIC, 1);
    fx->alice = connect_as(fx, "alice", "alice", 4);
    fx->c[BOB] = connect_as(fx, "bob", "bob", 4);
    fx->c[BOB5] = connect_as(fx, "bob5", "bob5", 5);
    if (!closed) {
        join(fx->c[BOB], "bob");
        join(fx->c[BOB5], "bob5");
    }
    if (with_eve) {
        fx->c[EVE] = connect_as(fx, "eve", "eve", 4);
        fx->c[EVE5] = connect_as(fx, "eve5", "eve5", 5);
        fx->c[ANON] = connect_as(fx, "anon", NULL, 4);
    }
    for (int i = 0; i < 3; i++)
        bad_alice_sends(fx, "setup");
    harness_expect_store(fx->c[BOB], GROUP, fx->head);
}

void bad_teardown(fixture *fx)
{
    for (int i = 0; i < ACTORS; i++)
        if (fx->c[i] != NULL)
            harness_client_disconnect(fx->c[i]);
    harness_client_disconnect(fx->alice);
    harness_client_disconnect(fx->carol);
    if (fx->admin != NULL)
        harness_client_disconnect(fx->admin);
    ts_broker_destroy(fx->b);
}

/* After a variant: the sender is still connected and answered, with
 * nothing before the answer; another client carries on; the store serves
 * every earlier message. */
void bad_carry_on(fixture *fx, enum actor who, const char *name)
{
    harness_client *c = fx->c[who];
    cJSON *resp;
    const cJSON *entry, *command;

    ASSERTF(!harness_client_is_lost(c), "%s: %s lost its connection", name, actor_names[who]);
    resp = harness_request(c, SYNC_ONLY, WAIT_MS);
    entry = harness_response_only(resp);
    command = cJSON_GetObjectItemCaseSensitive(entry, "command");
    ASSERTF(cJSON_IsString(command) && strcmp(command->valuestring, "sync") == 0,
            "%s: the next response to %s is not the answer to its sync (a second response to the "
            "bad input?)",
            name, actor_names[who]);
    cJSON_Delete(resp);
    harness_client_expect_none(c, 0, "nothing but the answers");
    bad_alice_sends(fx, name);
    harness_expect_store(fx->c[BOB], GROUP, fx->head);
}

bool bad_selected(fixture *fx, const char *name)
{
    if (fx->only != NULL && strcmp(fx->only, "--list") == 0) {
        printf("%s\n", name);
        return false;
    }
    if (fx->only != NULL && strcmp(fx->only, name) != 0)
        return false;
    fx->ran++;
    ts_log("variant %s", name);
    return true;
}

void bad_check_entries(const variant *v, const cJSON *resp)
{
    ASSERTF(harness_response_count(resp) == v->n, "%s: %d response entries, expected %d", v->name,
            harness_response_count(resp), v->n);
    for (int i = 0; i < v->n; i++) {
        const cJSON *entry = harness_response_entry(resp, i);
        const cJSON *cid = cJSON_GetObjectItemCaseSensitive(entry, "cid");
        if (i == 0 && v->e[i].error != NULL && v->maybe_cid != NULL && cJSON_IsString(cid) &&
            strcmp(cid->valuestring, v->maybe_cid) == 0)
            harness_expect_error(entry, v->e[i].command, v->e[i].group, v->maybe_cid,
                                 v->e[i].error);
        else if (v->e[i].error != NULL)
            harness_expect_error(entry, v->e[i].command, v->e[i].group, v->e[i].cid, v->e[i].error);
        else
            harness_expect_ok(entry, v->e[i].command, v->e[i].group);
    }
}

void bad_run(fixture *fx, const variant *v)
{
    harness_client *c = fx->c[v->who];
    size_t len = v->len != 0 ? v->len : (v->payload != NULL ? strlen(v->payload) : 0);
    bool v5 = v->who == BOB5 || v->who == EVE5;
    cJSON *resp = NULL;

    if (!bad_selected(fx, v->name))
        return;
    ASSERTF(c != NULL, "%s: no client %s in this case", v->name, actor_names[v->who]);
    switch (v->kind) {
    case REQUEST:
        resp = harness_request_bytes(c, v->payload, len, WAIT_MS);
        break;
    case PUBLISH: {
        int qos = v->qos == 2 ? 2 : 1;
        int rc = harness_client_publish_bytes(c, v->topic, v->payload, len, qos, NULL);
        if (v5)
            ASSERTF(rc == 0x87, "%s: MQTT 5 %s got reason 0x%02x, expected 0x87 (not authorized)",
                    v->name, qos == 2 ? "PUBREC" : "PUBACK", (unsigned)rc);
        resp = harness_client_response(c, WAIT_MS);
        break;
    }
    case SUBSCRIBE: {
        int code = harness_client_try_subscribe(c, v->topic, 1);
        ASSERTF(code == (v5 ? 0x87 : 0x80), "%s: SUBACK 0x%02x for %s, expected 0x%02x", v->name,
                (unsigned)code, v->topic, v5 ? 0x87u : 0x80u);
        resp = harness_client_response(c, WAIT_MS);
        break;
    }
    }
    bad_check_entries(v, resp);
    cJSON_Delete(resp);
    bad_carry_on(fx, v->who, v->name);
}

/* Shorthands for the common shapes. */
void bad_request_error(fixture *fx, const char *name, const char *request, const char *command,
                       const char *group, const char *error)
{
    variant v = {.name = name, .who = BOB, .kind = REQUEST, .payload = request, .n = 1};

    v.e[0] = (expect){command, group, NULL, error};
    bad_run(fx, &v);
}

void bad_request_bytes_error(fixture *fx, const char *name, const char *bytes, size_t len,
                             const char *error)
{
    variant v = {.name = name, .who = BOB, .kind = REQUEST, .payload = bytes, .len = len, .n = 1};

    v.e[0] = (expect){"request", NULL, NULL, error};
    bad_run(fx, &v);
}

void bad_publish_error(fixture *fx, const char *name, enum actor who, const char *topic,
                       const char *payload, size_t len, int qos, expect e)
{
    variant v = {.name = name,
                 .who = who,
                 .kind = PUBLISH,
                 .topic = topic,
                 .payload = payload,
                 .len = len,
                 .qos = qos,
                 .n = 1};

    v.e[0] = e;
    bad_run(fx, &v);
}

/* A publish with an invalid cid: the entry may echo it as sent, or not. */
void bad_publish_bad_cid(fixture *fx, const char *name, enum actor who, const char *payload,
                         int qos, const char *cid)
{
    variant v = {.name = name,
                 .who = who,
                 .kind = PUBLISH,
                 .topic = TOPIC,
                 .payload = payload,
                 .qos = qos,
                 .n = 1,
                 .maybe_cid = cid};

    v.e[0] = (expect){"publish", GROUP, NULL, E_CID};
    bad_run(fx, &v);
}

void bad_subscribe_error(fixture *fx, const char *name, enum actor who, const char *filter,
                         expect e)
{
    variant v = {.name = name, .who = who, .kind = SUBSCRIBE, .topic = filter, .n = 1};

    v.e[0] = e;
    bad_run(fx, &v);
}

char *bad_repeat(char ch, size_t n)
{
    char *s = malloc(n + 1);

    if (s == NULL)
        FAILF("out of memory");
    memset(s, ch, n);
    s[n] = '\0';
    return s;
}

/* ===========================================================================
 * main
 * ========================================================================= */

int bad_main(int argc, char **argv, const bad_case *cases, size_t count)
{
    fixture fx;
    char name[128];
    const bad_case *tc = NULL;

    for (size_t i = 0; argc > 1 && i < count; i++)
        if (strcmp(argv[1], cases[i].name) == 0)
            tc = &cases[i];
    if (tc == NULL) {
        fprintf(stderr, "usage: %s <case> [variant]; cases:", argv[0]);
        for (size_t i = 0; i < count; i++)
            fprintf(stderr, " %s", cases[i].name);
        fputc('\n', stderr);
        return 2;
    }
    memset(&fx, 0, sizeof fx);
    fx.only = argc > 2 ? argv[2] : NULL;
    if (fx.only != NULL && strcmp(fx.only, "--list") == 0) {
        tc->fn(&fx); /* prints the variant names, runs none */
        return 0;
    }
    snprintf(name, sizeof name, "integ_bad_%s", tc->name);
    ts_init(name);
    bad_setup(&fx, NULL, tc->closed, tc->closed);
    tc->fn(&fx);
    ASSERTF(fx.ran > 0, "no variant named \"%s\"", fx.only != NULL ? fx.only : "");
    ts_log("%d variant(s) passed", fx.ran);
    bad_teardown(&fx);
    return ts_pass();
}
