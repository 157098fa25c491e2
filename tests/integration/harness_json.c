/* harness_json.c: the chat protocol as the tests read it: JSON fields,
 * replay pages, acks, and requests on $CONTROL/chat/v1 with their
 * responses. */
#include "harness_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fails the test, showing the JSON the complaint is about. */
_Noreturn void harness_fail_json(const cJSON *json, const char *what, const char *key)
{
    char *text = cJSON_PrintUnformatted(json);

    FAILF("%s%s%s in %.600s", what, key != NULL ? " " : "", key != NULL ? key : "",
          text != NULL ? text : "(unprintable JSON)");
}

cJSON *harness_json_object(const harness_msg *m)
{
    cJSON *json = cJSON_ParseWithLength(m->payload, m->len);

    if (!cJSON_IsObject(json))
        FAILF("message on %s is not a JSON object: %.600s", m->topic, m->payload);
    return json;
}

int64_t harness_json_int(const cJSON *obj, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    double d;

    if (!cJSON_IsNumber(item))
        harness_fail_json(obj, "missing or non-numeric field", key);
    d = item->valuedouble;
    if (!(d >= -9.0e15 && d <= 9.0e15) || (double)(int64_t)d != d)
        harness_fail_json(obj, "non-integer field", key);
    return (int64_t)d;
}

const char *harness_json_str(const cJSON *obj, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);

    if (!cJSON_IsString(item) || item->valuestring == NULL)
        harness_fail_json(obj, "missing or non-string field", key);
    return item->valuestring;
}

bool harness_json_bool(const cJSON *obj, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);

    if (item == NULL)
        return false;
    if (!cJSON_IsBool(item))
        harness_fail_json(obj, "non-boolean field", key);
    return cJSON_IsTrue(item);
}

bool harness_page_parse(const harness_msg *m, harness_page *p)
{
    const cJSON *responses, *entry;
    cJSON *root;
    int n;

    memset(p, 0, sizeof *p);
    if (strcmp(m->topic, HARNESS_RESPONSE_TOPIC) != 0)
        return false;
    root = harness_json_object(m);
    responses = cJSON_GetObjectItemCaseSensitive(root, "responses");
    if (!cJSON_IsArray(responses))
        harness_fail_json(root, "no \"responses\" array", NULL);
    if ((n = cJSON_GetArraySize(responses)) != 1)
        harness_fail_json(root, "a replay page must be one message with one entry, not this", NULL);
    entry = cJSON_GetArrayItem(responses, 0);
    if (!cJSON_IsObject(entry))
        harness_fail_json(root, "a response entry is not an object", NULL);
    if (cJSON_GetObjectItemCaseSensitive(entry, "error") != NULL)
        harness_fail_json(root, "unexpected error entry", NULL);
    if (strcmp(harness_json_str(entry, "command"), "replay") != 0)
        harness_fail_json(root, "expected a replay page, got", "another command");
    p->root = root;
    p->group = harness_json_str(entry, "group");
    p->messages = cJSON_GetObjectItemCaseSensitive(entry, "messages");
    if (!cJSON_IsArray(p->messages))
        harness_fail_json(root, "no \"messages\" array", NULL);
    p->count = (size_t)cJSON_GetArraySize(p->messages);
    p->first = harness_json_int(entry, "first");
    p->last = harness_json_int(entry, "last");
    p->head = harness_json_int(entry, "head");
    p->more = harness_json_bool(entry, "more");
    p->truncated = harness_json_bool(entry, "truncated");
    p->at_ms = m->at_ms;
    return true;
}

void harness_page_free(harness_page *p)
{
    cJSON_Delete(p->root);
    memset(p, 0, sizeof *p);
}

void harness_ack(harness_client *c, const char *group, int64_t id, int qos)
{
    char topic[300], payload[32];

    snprintf(topic, sizeof topic, "chat/%s/ack", group);
    snprintf(payload, sizeof payload, "%lld", (long long)id);
    harness_client_publish(c, topic, payload, qos);
}

/* ===========================================================================
 * Requests and responses
 * ========================================================================= */

bool harness_is_push(const char *payload, size_t len)
{
    static const char reads[] = "{\"responses\":[{\"command\":\"reads\"";
    static const char presence[] = "{\"responses\":[{\"command\":\"presence\"";
    const cJSON *e;
    bool push = true;

    /* Most responses are answers and pages: only these two starts parse. */
    if ((len < sizeof reads - 1 || memcmp(payload, reads, sizeof reads - 1) != 0) &&
        (len < sizeof presence - 1 || memcmp(payload, presence, sizeof presence - 1) != 0))
        return false;
    cJSON *root = cJSON_ParseWithLength(payload, len);
    const cJSON *entries = cJSON_GetObjectItemCaseSensitive(root, "responses");
    cJSON_ArrayForEach(e, entries)
    {
        const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(e, "command");
        bool is_reads = cJSON_IsString(cmd) && strcmp(cmd->valuestring, "reads") == 0;
        bool is_presence = cJSON_IsString(cmd) && strcmp(cmd->valuestring, "presence") == 0 &&
                           !cJSON_GetObjectItemCaseSensitive(e, "members") &&
                           !cJSON_GetObjectItemCaseSensitive(e, "error");
        push = push && (is_reads || is_presence) &&
               !cJSON_GetObjectItemCaseSensitive(e, "correlationData");
    }
    push = push && cJSON_IsArray(entries);
    cJSON_Delete(root);
    return push;
}

/* Whether m is on the response topic and is not a replay page. */
static bool is_answer(const harness_msg *m, void *arg)
{
    const char *topic = arg != NULL ? arg : HARNESS_RESPONSE_TOPIC;
    cJSON *root;
    const cJSON *first, *command;
    bool answer;

    if (strcmp(m->topic, topic) != 0)
        return false;
    root = cJSON_ParseWithLength(m->payload, m->len);
    first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "responses"), 0);
    command = cJSON_GetObjectItemCaseSensitive(first, "command");
    /* Anything that is not a replay page counts (an error entry of a
     * command named "replay" too): the caller checks it and fails on
     * garbage. */
    answer = !(cJSON_IsString(command) && strcmp(command->valuestring, "replay") == 0 &&
               cJSON_GetObjectItemCaseSensitive(first, "error") == NULL);
    cJSON_Delete(root);
    return answer;
}

/* Parses a response and checks its outer shape. */
static cJSON *parse_response(const harness_msg *m)
{
    cJSON *root = harness_json_object(m);
    const cJSON *responses = cJSON_GetObjectItemCaseSensitive(root, "responses");

    if (!cJSON_IsArray(responses) || cJSON_GetArraySize(root) != 1)
        harness_fail_json(root, "a response must be exactly {\"responses\":[...]}, not", NULL);
    return root;
}

cJSON *harness_client_response_on(harness_client *c, const char *topic, int timeout_ms)
{
    harness_msg *m = harness_client_receive_if(c, is_answer, (void *)topic, timeout_ms);
    cJSON *root;

    if (m == NULL)
        FAILF("client %s: no response on %s within %d ms%s", c->id,
              topic != NULL ? topic : HARNESS_RESPONSE_TOPIC, timeout_ms,
              harness_client_is_lost(c) ? " (its connection was lost)" : "");
    root = parse_response(m);
    harness_msg_free(m);
    return root;
}

cJSON *harness_client_response(harness_client *c, int timeout_ms)
{
    return harness_client_response_on(c, NULL, timeout_ms);
}

cJSON *harness_request_bytes(harness_client *c, const void *request, size_t len, int timeout_ms)
{
    harness_client_publish_bytes(c, HARNESS_CONTROL_TOPIC, request, len, 1, NULL);
    return harness_client_response(c, timeout_ms);
}

cJSON *harness_request(harness_client *c, const char *request, int timeout_ms)
{
    return harness_request_bytes(c, request, strlen(request), timeout_ms);
}

/* The answer to BARRIER_REQUEST: no request of a test has no command. */
#define BARRIER_REQUEST "{\"commands\":[]}"
#define BARRIER_ANSWER "{\"responses\":[]}"

static bool is_barrier(const harness_msg *m, void *arg)
{
    (void)arg;
    return strcmp(m->topic, HARNESS_RESPONSE_TOPIC) == 0 && strcmp(m->payload, BARRIER_ANSWER) == 0;
}

void harness_barrier(harness_client *c)
{
    harness_msg *m;

    harness_client_publish(c, HARNESS_CONTROL_TOPIC, BARRIER_REQUEST, 1);
    m = harness_client_receive_if(c, is_barrier, NULL, CLIENT_TIMEOUT_MS);
    if (m == NULL)
        FAILF("client %s: no answer to an empty request within %d ms%s", c->id, CLIENT_TIMEOUT_MS,
              harness_client_is_lost(c) ? " (its connection was lost)" : "");
    harness_msg_free(m);
}

void harness_expect_quiet(harness_client *c, const char *what)
{
    harness_barrier(c);
    harness_client_expect_none(c, 0, what);
}

int harness_response_count(const cJSON *resp)
{
    return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(resp, "responses"));
}

const cJSON *harness_response_entry(const cJSON *resp, int i)
{
    const cJSON *entry = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(resp, "responses"), i);

    if (!cJSON_IsObject(entry)) {
        char what[64];
        snprintf(what, sizeof what, "no response entry %d (an object) in", i);
        harness_fail_json(resp, what, NULL);
    }
    return entry;
}

const cJSON *harness_response_only(const cJSON *resp)
{
    if (harness_response_count(resp) != 1)
        harness_fail_json(resp, "expected exactly one response entry, got", NULL);
    return harness_response_entry(resp, 0);
}

void harness_expect_ok(const cJSON *entry, const char *command, const char *group)
{
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(entry, "command");
    const cJSON *grp = cJSON_GetObjectItemCaseSensitive(entry, "group");

    if (cJSON_GetObjectItemCaseSensitive(entry, "error") != NULL)
        harness_fail_json(entry, "unexpected error entry:", NULL);
    if (!cJSON_IsString(cmd) || strcmp(cmd->valuestring, command) != 0)
        harness_fail_json(entry, "expected a success entry for command", command);
    if (group != NULL && (!cJSON_IsString(grp) || strcmp(grp->valuestring, group) != 0))
        harness_fail_json(entry, "expected a success entry for group", group);
}

void harness_expect_duplicate(harness_client *c, const char *group, const char *cid, int64_t id,
                              int timeout_ms)
{
    cJSON *resp = harness_client_response(c, timeout_ms);
    const cJSON *e = harness_response_only(resp);
    const cJSON *item;
    int fields = 0;

    cJSON_ArrayForEach(item, e)
    {
        fields++;
    }
    if (fields != 5 || strcmp(harness_json_str(e, "command"), "publish") != 0 ||
        strcmp(harness_json_str(e, "group"), group) != 0 ||
        strcmp(harness_json_str(e, "cid"), cid) != 0 || harness_json_int(e, "id") != id ||
        !harness_json_bool(e, "duplicate")) {
        char expect[400];
        snprintf(expect, sizeof expect,
                 "(expected {\"command\":\"publish\",\"group\":\"%s\",\"cid\":\"%s\",\"id\":%lld,"
                 "\"duplicate\":true}) got",
                 group, cid, (long long)id);
        harness_fail_json(e, "not the answer to a retry", expect);
    }
    cJSON_Delete(resp);
}

void harness_expect_error(const cJSON *entry, const char *command, const char *group,
                          const char *cid, const char *error)
{
    const cJSON *item;
    int fields = 0;

    cJSON_ArrayForEach(item, entry)
    {
        const char *want = NULL;
        fields++;
        if (strcmp(item->string, "command") == 0)
            want = command;
        else if (strcmp(item->string, "group") == 0)
            want = group;
        else if (strcmp(item->string, "cid") == 0)
            want = cid;
        else if (strcmp(item->string, "error") == 0)
            want = error;
        if (want == NULL || !cJSON_IsString(item) || strcmp(item->valuestring, want) != 0) {
            char expect[1200];
            snprintf(expect, sizeof expect,
                     "(expected {\"command\":\"%s\"%s%s%s%s%s%s,\"error\":\"%s\"}) got", command,
                     group != NULL ? ",\"group\":\"" : "", group != NULL ? group : "",
                     group != NULL ? "\"" : "", cid != NULL ? ",\"cid\":\"" : "",
                     cid != NULL ? cid : "", cid != NULL ? "\"" : "", error);
            harness_fail_json(entry, "wrong or unexpected field", expect);
        }
    }
    if (fields != 2 + (group != NULL) + (cid != NULL)) {
        char expect[1200];
        snprintf(expect, sizeof expect, "(expected command%s%s and error \"%s\") in",
                 group != NULL ? ", group" : "", cid != NULL ? ", cid" : "", error);
        harness_fail_json(entry, "missing fields", expect);
    }
}
