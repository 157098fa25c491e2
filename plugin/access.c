/* access.c: the one access policy: who a client is, and whether it may do
 * an action to a group (see access.h for the rules and why one function). */
#include "access.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const NOT_MEMBER = "not a member of the group";
static const char *const CLOSED_NEEDS_NAME =
    "closed groups admit only clients with a username the broker verifies";
static const char *const BROKER_DENIES = "the broker does not let you read this group";
static const char *const CANNOT_ASK =
    "history is unavailable: this broker cannot tell mosquitto-chat whether you may read the "
    "group (see plugin_opt_read_check)";

const char *chat_member(struct chat_plugin *pl, const struct mosquitto *client,
                        char buf[CHAT_MEMBER_BUF])
{
    const char *user = mosquitto_client_username(client);
    bool verified = user && user[0] && chat_broker_verified(pl, client);
    return chat_member_name(pl->cfg.tilde_names, verified, user, mosquitto_client_id(client), buf);
}

chat_err chat_join_group(struct chat_plugin *pl, const char *group, const char *member,
                         const char *device, uint64_t *joined)
{
    chat_err dev = CHAT_OK;
    chat_err rc = chat_store_member_join(pl->store, group, member, device, joined, &dev);
    if (dev != CHAT_OK) {
        /* The membership stands; only its expiry waits for a device. */
        chat_log_store_error(pl, dev, "cursor of %s joining %s", device, group);
    }
    return rc;
}

const char *chat_identity_of(struct chat_plugin *pl, const struct mosquitto *client,
                             struct chat_identity *id)
{
    const char *user = mosquitto_client_username(client);
    id->device = mosquitto_client_id(client);
    id->named = user && user[0];
    id->verified = id->named && chat_broker_verified(pl, client);
    const char *why = chat_member_name(pl->cfg.tilde_names, id->verified, user,
                                       mosquitto_client_id(client), id->member);
    id->admin = id->verified && !why && chat_config_is_admin(&pl->cfg, user);
    return why;
}

int chat_access_pass(struct chat_plugin *pl, const struct mosquitto *client)
{
    if (chat_broker_v21(pl)) {
        /* 2.1 can be told "no opinion": the checkers after ours decide, and
         * where none answers (none loaded, or plugins that check no
         * access, which the configuration scan cannot tell from checkers)
         * the broker decides as it would without us. "Allow" would skip a
         * checker the scan missed (2.1's plugin_use); "defer" with no one
         * to answer is a denial of everything we do not object to. Safe
         * because ours is the first checker of its chain (chat_broker_check
         * refuses to start otherwise): 2.1 keeps the last answer of a
         * chain, so an "ignore" after another's "defer" would hide it. */
        return CHAT_PLUGIN_IGNORE;
    }
    return chat_broker_alone(pl, client) ? MOSQ_ERR_SUCCESS : MOSQ_ERR_PLUGIN_DEFER;
}

int chat_access_aside(const struct chat_plugin *pl)
{
    /* The broker's verdict is what the checkers after ours answer, and on
     * 2.1, where none answers, the broker's default: the verdict the broker
     * gives a live reader when we pass (chat_access_pass). On 2.0 "defer"
     * is all there is. */
    return chat_broker_v21(pl) ? CHAT_PLUGIN_IGNORE : MOSQ_ERR_PLUGIN_DEFER;
}

static struct chat_decision deny(const char *why)
{
    struct chat_decision d = {.verdict = CHAT_DENY, .why = why};
    return d;
}

/* d refused for why, keeping what it says of membership (a client that
 * joined on the way stays a member). */
static struct chat_decision refuse(struct chat_decision d, const char *why)
{
    d.verdict = CHAT_DENY;
    d.why = why;
    return d;
}

static struct chat_decision allow(void)
{
    struct chat_decision d = {.verdict = CHAT_ALLOW};
    return d;
}

/* Membership of id in group, joining an open group when join is set: NULL,
 * or the reason (a store error logged). */
static const char *member_of(struct chat_plugin *pl, const struct chat_identity *id,
                             const char *group, bool join, bool *member, bool *joined)
{
    uint64_t since = 0;
    bool found = false;
    chat_err rc = chat_store_member_get(pl->store, group, id->member, &since, &found);
    if (rc == CHAT_OK && !found && join && pl->cfg.open_groups) {
        /* The joining device gets its cursor at the join, in the same
         * store call: the membership then has a device whose expiry can
         * take it (open groups), even when that device only publishes. */
        rc = chat_join_group(pl, group, id->member, id->device, &since);
        found = *joined = rc == CHAT_OK;
    }
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "membership of %s in %s", id->member, group);
        return "storage error";
    }
    *member = found;
    return NULL;
}

/* What the broker's read verdict allows a member: NULL, or why not. An
 * unknown verdict fails closed, unless the operator said with
 * plugin_opt_read_check members that every member may read its groups. */
static const char *read_right(struct chat_plugin *pl, struct mosquitto *client, const char *group,
                              bool fresh)
{
    switch (chat_verdict_read(pl, client, group, fresh)) {
    case CHAT_BV_ALLOW:
        return NULL;
    case CHAT_BV_DENY:
        return BROKER_DENIES;
    default:
        return pl->cfg.read_check == CHAT_READ_MEMBERS ? NULL : CANNOT_ASK;
    }
}

struct chat_decision chat_access_decide(struct chat_plugin *pl, struct mosquitto *client,
                                        const char *group, enum chat_action action)
{
    struct chat_identity id;
    const char *why = chat_identity_of(pl, client, &id);
    bool alone = chat_broker_alone(pl, client);
    bool member = false;
    bool joined = false;
    struct chat_decision d = allow();

    if (action == CHAT_DO_ADMIN) {
        if (why) {
            return deny(why);
        }
        if (!id.admin) {
            /* why NULL: no admin; the caller names the command refused. */
            return deny(id.named && !id.verified &&
                                chat_config_is_admin(&pl->cfg, mosquitto_client_username(client))
                            ? "admin commands need a username the broker verifies: this broker "
                              "(or listener) does not check usernames"
                            : NULL);
        }
        return d;
    }
    if (why) {
        return deny(why);
    }
    if (action == CHAT_DO_JOIN) {
        /* A request on $CONTROL says nothing of the right to a group's
         * topics: behind the broker's own access control a member joins by
         * publishing or acking there, where the broker checked it. */
        if (!pl->cfg.open_groups) {
            return deny("only an admin may change membership of closed groups");
        }
        return alone ? d
                     : deny("with the broker's own access control, join by publishing or acking "
                            "on the group, or ask an admin");
    }
    if (action == CHAT_DO_PUSH) {
        /* Counted online as a member (CHAT_DO_ONLINE; presence.c forgets a
         * member that leaves): only the read right, which the broker may
         * have taken away since, is asked again (remembered per device). */
        return (why = read_right(pl, client, group, false)) != NULL ? deny(why) : d;
    }
    if (!pl->cfg.open_groups && !id.verified) {
        return deny(CLOSED_NEEDS_NAME);
    }
    if (action == CHAT_DO_SYNC) {
        return d;
    }
    /* Who joins on the way: a publish (it passed the broker's write check);
     * an ack or read marker behind other checkers (it passed theirs too;
     * alone, a subscribe has joined already); a subscribe where the
     * broker's verdict is known to allow reading (below). */
    bool join = action == CHAT_DO_SEND || (action == CHAT_DO_MARK_TOPIC && !alone);
    if ((why = member_of(pl, &id, group, join, &member, &joined)) != NULL) {
        return deny(why);
    }
    d.joined = joined;
    d.member = member;

    switch (action) {
    case CHAT_DO_SEND:
        return member ? d : refuse(d, NOT_MEMBER);

    case CHAT_DO_SUBSCRIBE:
        if (!member && !pl->cfg.open_groups) {
            return refuse(d, NOT_MEMBER);
        }
        /* Alone, our answer is final: the subscriber joins and catches up.
         * Behind other checkers the subscribe may yet be refused after our
         * answer (Mosquitto never tells): it joins and catches up only when
         * the broker's own checks would let it read the group live; else
         * it is only let through, for the broker's read check of each live
         * message to decide on, and joins at its first publish or ack. */
        if (member) {
            return d; /* its catch-up and presence ask HISTORY and ONLINE */
        }
        if (alone || chat_verdict_read(pl, client, group, true) == CHAT_BV_ALLOW) {
            if ((why = member_of(pl, &id, group, true, &member, &d.joined)) != NULL) {
                return refuse(d, why);
            }
            d.member = member;
            return d;
        }
        d.pending = true;
        return d;

    case CHAT_DO_DELIVER:
        /* A persistent session away is caught up when it comes back: the
         * broker queues nothing for it, so nothing comes twice. */
        if (chat_peer_offline(pl, client)) {
            return refuse(d, "away: caught up when it comes back");
        }
        if (member) {
            return d;
        }
        {
            const char *cid = mosquitto_client_id(client);
            if (cid && chat_pending_has(pl, cid, group)) {
                d.pending = true;
                return d;
            }
        }
        return refuse(d, NOT_MEMBER);

    case CHAT_DO_INSPECT:
        /* An admin inspects any group read-only, without becoming a
         * member (d.member says whether it is one). */
        if (id.admin) {
            return d;
        }
        /* fall through */
    case CHAT_DO_HISTORY:
    case CHAT_DO_LIST:
        if (!member) {
            return refuse(d, NOT_MEMBER);
        }
        return (why = read_right(pl, client, group, true)) != NULL ? refuse(d, why) : d;

    case CHAT_DO_MARK:
    case CHAT_DO_MARK_TOPIC:
        if (!member) {
            return refuse(d, NOT_MEMBER);
        }
        /* A marker moves only the client's own cursor: refused only where
         * the broker is known to deny reading (it has received nothing to
         * ack, and the answer, clamped to the head, would tell it the
         * head). */
        return chat_verdict_read(pl, client, group, true) == CHAT_BV_DENY ? refuse(d, BROKER_DENIES)
                                                                          : d;

    case CHAT_DO_CHANGE:
        /* A change is a message to the group, sent by request: the member
         * must still be let read the group (its history) and write to it,
         * which the broker's own write check cannot ask of a request on
         * $CONTROL. An unknown write verdict fails closed. */
        if (!member) {
            return refuse(d, NOT_MEMBER);
        }
        if ((why = read_right(pl, client, group, true)) != NULL) {
            return refuse(d, why);
        }
        switch (chat_verdict_write(pl, client, group)) {
        case CHAT_BV_ALLOW:
            return d;
        case CHAT_BV_DENY:
            return refuse(d, "the broker does not let you write to this group");
        default:
            return refuse(d, "recall and edit are unavailable: this broker cannot tell "
                             "mosquitto-chat whether you may write to the group");
        }

    case CHAT_DO_ONLINE:
        if (!member) {
            return refuse(d, NOT_MEMBER);
        }
        /* Counted (and pushed to) only where the broker lets it read: an
         * unknown verdict fails closed, it is then not seen online. */
        return (why = read_right(pl, client, group, true)) != NULL ? refuse(d, why) : d;

    default:
        return refuse(d, "unknown action");
    }
}

const char *chat_access_wake(const struct chat_plugin *pl)
{
    if (chat_broker_all_alone(pl) || pl->cfg.read_check == CHAT_READ_MEMBERS) {
        return NULL;
    }
    return "push notifications are off on this broker: behind its own access checks "
           "mosquitto-chat cannot ask whether a member who is not connected may read a group "
           "(see plugin_opt_read_check)";
}

const char *chat_access_list(struct chat_plugin *pl, struct mosquitto *client, const char *group,
                             uint64_t *members)
{
    struct chat_decision d = chat_access_decide(pl, client, group, CHAT_DO_LIST);
    if (d.verdict != CHAT_ALLOW) {
        return d.why;
    }
    chat_err rc = chat_store_member_count(pl->store, group, members);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "member count of %s", group);
        return "storage error";
    }
    return NULL;
}
