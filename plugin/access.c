/* access.c: who may use a group: membership (joining open groups on the
 * way) and, behind the broker's other access checkers, its answer on
 * whether a client may read the group. Used by every part that serves a
 * group; it calls nothing but the store. */
#include "plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct chat_access {
    chat_acl_check_fn broker_check; /* NULL when the broker does not export it */
    bool probing;                   /* inside our own call of broker_check */
};

bool chat_access_init(struct chat_plugin *pl)
{
    pl->access = calloc(1, sizeof(*pl->access));
    return pl->access != NULL;
}

void chat_access_free(struct chat_plugin *pl)
{
    free(pl->access);
    pl->access = NULL;
}

void chat_access_set_broker_check(struct chat_plugin *pl, chat_acl_check_fn check)
{
    pl->access->broker_check = check;
}

bool chat_access_broker_asked(const struct chat_plugin *pl)
{
    return pl->access->broker_check != NULL;
}

bool chat_access_probing(const struct chat_plugin *pl)
{
    return pl->access->probing;
}

const char *chat_admit(struct chat_plugin *pl, const struct mosquitto *client, const char *group,
                       bool join)
{
    char member[CHAT_MEMBER_BUF];
    const char *user = mosquitto_client_username(client);
    const char *why = chat_member(pl, client, member);
    uint64_t joined = 0;
    bool found = false;

    if (why) {
        return why;
    }
    if (!pl->cfg.open_groups && !(user && user[0])) {
        return "closed groups admit only clients with a username";
    }
    chat_err rc = chat_store_member_get(pl->store, group, member, &joined, &found);
    if (rc == CHAT_OK && !found && join && pl->cfg.open_groups) {
        rc = chat_store_member_add(pl->store, group, member, &joined);
        found = rc == CHAT_OK;
    }
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "membership of %s in %s", member, group);
        return "storage error";
    }
    return found ? NULL : "not a member of the group";
}

bool chat_is_member(struct chat_plugin *pl, const struct mosquitto *client, const char *group)
{
    char member[CHAT_MEMBER_BUF];
    uint64_t joined = 0;
    bool found = false;
    if (chat_member(pl, client, member)) {
        return false;
    }
    chat_err rc = chat_store_member_get(pl->store, group, member, &joined, &found);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "membership of %s in %s", member, group);
    }
    return rc == CHAT_OK && found;
}

/* Asks the broker's access checks (broker_check set) whether client may
 * read <prefix>/<group> live: NULL, or why not. */
static const char *broker_lets_read(struct chat_plugin *pl, struct mosquitto *client,
                                    const char *group)
{
    char topic[CHAT_GROUP_MAX + 256];
    snprintf(topic, sizeof(topic), "%s/%s", pl->cfg.topic_prefix, group);
    /* The questions a subscription to the group and each live delivery on
     * it would put to the broker's access checks (dynamic-security answers
     * them apart; acl_file in 2.0 allows every subscription and checks
     * reads); on_acl stands aside while we ask. */
    struct chat_access *a = pl->access;
    a->probing = true;
    int rc = a->broker_check(client, topic, 0, NULL, 0, false, MOSQ_ACL_SUBSCRIBE);
    if (rc == MOSQ_ERR_SUCCESS) {
        rc = a->broker_check(client, topic, 0, NULL, 0, false, MOSQ_ACL_READ);
    }
    a->probing = false;
    return rc == MOSQ_ERR_SUCCESS ? NULL : "the broker does not let you read this group";
}

const char *chat_may_read(struct chat_plugin *pl, struct mosquitto *client, const char *group)
{
    if (pl->cfg.acl_mode == CHAT_ACL_ALLOW || pl->cfg.read_check == CHAT_READ_MEMBERS) {
        return NULL;
    }
    if (!pl->access->broker_check) {
        return "history is unavailable: this broker cannot tell mosquitto-chat whether you may "
               "read the group (see plugin_opt_read_check)";
    }
    return broker_lets_read(pl, client, group);
}

const char *chat_admit_marker(struct chat_plugin *pl, struct mosquitto *client, const char *group,
                              bool join)
{
    /* chat_may_read, less its refusal where the broker cannot be asked. */
    const char *why = chat_admit(pl, client, group, join);
    if (!why && pl->access->broker_check) {
        why = chat_may_read(pl, client, group);
    }
    return why;
}

const char *chat_admit_list(struct chat_plugin *pl, struct mosquitto *client, const char *group,
                            uint64_t *members)
{
    const char *why = chat_admit(pl, client, group, false);

    if (why || (why = chat_may_read(pl, client, group)) != NULL) {
        return why;
    }
    chat_err rc = chat_store_member_count(pl->store, group, members);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "member count of %s", group);
        return "storage error";
    }
    return NULL;
}
