/* takeover.c: a client id belongs to one user at a time (Mosquitto 2.1 on).
 *
 * The plugin answers a client by its client id (reply.c, through
 * mosquitto_broker_publish), and the broker resolves that id to a
 * connection only when it sends the message out: on 2.1 at the start of
 * the next pass of its loop, after this pass's connects were handled and
 * after the tick that pages catch-up (loop.c: the plugin's messages, the
 * tick, then the clients' packets). So a CONNECT that takes a client id
 * over in that pass gets what was built for the connection it replaced: a
 * user who is not a member of a group received another member's replay
 * pages by connecting with that member's client id (the hostile-client
 * audit of 2026-12-04, 16 to 20 pages in 8 s of takeovers on 2.1.2, none on
 * 2.0.x, whose tick comes after the packets and just before the flush).
 *
 * So on 2.1 the plugin refuses, at the broker's password check (before the
 * takeover), a CONNECT that claims a client id which another user's
 * connection holds, or held until its disconnect earlier in this pass (its
 * answers may still be queued for that id). The same user may take its
 * own id over, as a phone back on the network does. Users are compared by
 * the username the CONNECT claims: a claim of the same name still has to
 * pass the password check after ours, and a different one is refused
 * whatever its password; a name the broker does not check (its listener
 * checks none) is not the same user as that name checked.
 *
 * And a connection the broker refused (at our check or its password
 * check) still ends with a disconnect event that names the id it claimed:
 * it must not end the holder's catch-up, presence and answers, which go by
 * id (chat_takeover_holder; the hostile review: one refused CONNECT, even
 * with a wrong password, cut alice's catch-up and took her offline for
 * presence).
 *
 * Not covered: a listener whose certificate is the user
 * (use_identity_as_username, use_subject_as_username) and MQTT 5 enhanced
 * authentication, where the broker asks no password check (docs/protocol.md
 * says what an operator can do).
 *
 * Invariants, by name:
 *   owner-entry: an entry exists for each client id whose connection the
 *      broker authenticated (2.1's connect event) until it is gone, and
 *      then until the next tick (gone-until-tick); it names that
 *      connection, which only its own disconnect may end.
 *   gone-until-tick: the ids whose connection ended since the last tick
 *      are listed in gone, at most one entry each; the tick removes them.
 *
 * Ownership: struct chat_takeover is this module's (chat_takeover_init,
 * chat_takeover_free). Broker's thread only. */
#include "access.h"

#include <stdlib.h>
#include <string.h>

struct owner {
    const struct mosquitto *conn; /* the connection that holds the id now; NULL: gone */
    char *user;                   /* the username it authenticated with; NULL: none */
    bool verified;                /* its listener checks usernames (chat_broker_verified) */
    bool listed;                  /* in gone (gone-until-tick) */
};

struct chat_takeover {
    chat_hmap *owners; /* client id -> struct owner */
    char **gone;       /* client ids, gone-until-tick */
    size_t ngone, cap;
};

static void owner_free(void *p)
{
    struct owner *o = p;
    if (o) {
        free(o->user);
    }
    free(o);
}

bool chat_takeover_init(struct chat_plugin *pl)
{
    pl->takeover = calloc(1, sizeof(*pl->takeover));
    if (!pl->takeover || !(pl->takeover->owners = chat_hmap_create())) {
        chat_takeover_free(pl);
        return false;
    }
    return true;
}

void chat_takeover_free(struct chat_plugin *pl)
{
    struct chat_takeover *t = pl->takeover;
    if (!t) {
        return;
    }
    chat_hmap_destroy(t->owners, owner_free);
    for (size_t i = 0; i < t->ngone; i++) {
        free(t->gone[i]);
    }
    free(t->gone);
    free(t);
    pl->takeover = NULL;
}

/* One user: the same name, both checked by the broker or neither. A name
 * claimed on a listener that checks none (per_listener_settings, an
 * anonymous listener beside a password one) is nobody's: it takes over no
 * id that a checked name holds (the hostile review of a1f40d5: a client
 * with no account claimed alice's name and id there and got her pages). */
static bool same_user(const struct owner *o, const char *user, bool verified)
{
    bool names = (!o->user && !user) || (o->user && user && strcmp(o->user, user) == 0);
    return names && o->verified == verified;
}

void chat_takeover_connected(struct chat_plugin *pl, const struct mosquitto *client)
{
    struct chat_takeover *t = pl->takeover;
    const char *id = mosquitto_client_id(client);
    const char *user = mosquitto_client_username(client);
    if (!id) {
        return;
    }
    size_t len = strlen(id);
    struct owner *o = chat_hmap_get(t->owners, id, len);
    char *u = user ? strdup(user) : NULL;
    if (user && !u) {
        /* Out of memory: an id with no entry is not protected; say so. */
        mosquitto_log_printf(
            MOSQ_LOG_ERR, "mosquitto-chat: out of memory recording the user of client id %s", id);
        return;
    }
    if (!o) {
        if (!(o = calloc(1, sizeof(*o))) || !chat_hmap_put(t->owners, id, len, o, NULL)) {
            free(o);
            free(u);
            mosquitto_log_printf(MOSQ_LOG_ERR,
                                 "mosquitto-chat: out of memory recording the user of client id %s",
                                 id);
            return;
        }
    }
    free(o->user);
    o->user = u;
    o->verified = chat_broker_verified(pl, client);
    o->conn = client;
}

void chat_takeover_gone(struct chat_plugin *pl, const struct mosquitto *client)
{
    struct chat_takeover *t = pl->takeover;
    const char *id = mosquitto_client_id(client);
    struct owner *o = id ? chat_hmap_get(t->owners, id, strlen(id)) : NULL;
    if (!o || o->conn != client) {
        return; /* another connection holds the id now (owner-entry) */
    }
    o->conn = NULL;
    if (o->listed) {
        return;
    }
    if (t->ngone == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **n = realloc(t->gone, cap * sizeof(*n));
        if (!n) {
            /* Not listed: the entry stays until the id connects again,
             * refusing other users meanwhile; never less strict. */
            return;
        }
        t->gone = n;
        t->cap = cap;
    }
    char *copy = strdup(id);
    if (!copy) {
        return; /* as above */
    }
    t->gone[t->ngone++] = copy;
    o->listed = true;
}

void chat_takeover_tick(struct chat_plugin *pl)
{
    struct chat_takeover *t = pl->takeover;
    /* What was queued for these ids went out (or nowhere) at the start of
     * this pass, before this tick. */
    for (size_t i = 0; i < t->ngone; i++) {
        size_t len = strlen(t->gone[i]);
        struct owner *o = chat_hmap_get(t->owners, t->gone[i], len);
        if (o && !o->conn) {
            owner_free(chat_hmap_remove(t->owners, t->gone[i], len));
        } else if (o) {
            o->listed = false; /* connected again */
        }
        free(t->gone[i]);
    }
    t->ngone = 0;
}

bool chat_takeover_holder(struct chat_plugin *pl, const struct mosquitto *client)
{
    struct chat_takeover *t = pl->takeover;
    const char *id = mosquitto_client_id(client);
    const struct owner *o = id ? chat_hmap_get(t->owners, id, strlen(id)) : NULL;
    return !o || o->conn == client;
}

bool chat_takeover_refused(struct chat_plugin *pl, const struct mosquitto *client,
                           const char *username)
{
    struct chat_takeover *t = pl->takeover;
    const char *id = mosquitto_client_id(client);
    struct owner *o = id ? chat_hmap_get(t->owners, id, strlen(id)) : NULL;
    if (!o || same_user(o, username, chat_broker_verified(pl, client))) {
        return false;
    }
    bool unchecked = !chat_broker_verified(pl, client) && o->verified;
    mosquitto_log_printf(MOSQ_LOG_WARNING,
                         "mosquitto-chat: refused a connection as %s%s with client id %s, which "
                         "user %s %s: a client id belongs to one user at a time",
                         username ? username : "(no username)",
                         unchecked ? " (a name its listener does not check)" : "", id,
                         o->user ? o->user : "(no username)",
                         o->conn ? "is connected with" : "left in this pass of the broker's loop");
    return true;
}
