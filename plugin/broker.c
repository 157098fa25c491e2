/* broker.c: what the broker this plugin runs in is: its version, its
 * listeners and the access checkers their clients meet (read from its
 * configuration by broker_conf.c), which listener a client came through,
 * and the access checks it exports or lets us work out (see access.h). */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "access.h"
#include "aclfile.h"
#include "broker_conf.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The broker's own access check (src/security.c), exported by some builds
 * only: Debian's 2.0.11 (its CMake policy exports every symbol) with 2.0's
 * signature, 2.1 (ENABLE_EXPORTS) with a properties argument before access;
 * upstream and Debian builds of later 2.0 export none. */
typedef chat_broker_check_fn acl_check_20;
typedef int (*acl_check_21)(struct mosquitto *client, const char *topic, uint32_t payloadlen,
                            void *payload, uint8_t qos, bool retain, void *properties, int access);
/* 2.1's public mosquitto_client_port: the port of the client's listener. */
typedef int (*client_port_fn)(const struct mosquitto *client);

/* What one listener's clients meet, as the plugin applies it. */
struct listener_view {
    bool alone;    /* no other checker after ours */
    bool verified; /* usernames checked */
};

struct chat_broker {
    struct chat_broker_conf *conf;                /* calloc'd: about 140 KiB */
    struct listener_view view[CHAT_BC_LISTENERS]; /* per conf->listeners[] */
    chat_aclfile *acl[CHAT_BC_LISTENERS];         /* each listener's acl_file, parsed */
    char acl_why[CHAT_BC_LISTENERS][160];         /* why one could not be */
    bool refused_conf;                            /* the configuration was unreadable */
    bool v21;
    client_port_fn client_port;
    acl_check_20 check20;
    acl_check_21 check21;
    MOSQ_FUNC_generic_callback dynsec; /* 2.0 dynamic-security's own check, or NULL */
    bool emulate;                      /* work out the checkers after ours (not for a test) */
    bool uniform;                      /* every listener meets the same checkers */
    int current;                       /* the listener of the event under way, -1 none */
    chat_hmap *client_listener;        /* client id -> listener index + 1 (2.0 per listener) */
    pthread_t thread;                  /* the broker's thread (init) */
};

static void *sym(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

static bool env_on(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] == '1';
}

/* Loads the acl_file of every listener whose chain has one (sharing the
 * parse of a path named twice). */
static void load_acl_files(struct chat_broker *b)
{
    for (size_t i = 0; i < b->conf->n_listeners; i++) {
        const struct chat_bc_listener *l = &b->conf->listeners[i];
        chat_aclfile_free(b->acl[i]);
        b->acl[i] = NULL;
        b->acl_why[i][0] = '\0';
        for (size_t k = 0; k < l->n_chain; k++) {
            const struct chat_bc_checker *c = &l->chain[k];
            if (c->kind != CHAT_BC_ACL_FILE) {
                continue;
            }
            if (c->truncated) {
                snprintf(b->acl_why[i], sizeof(b->acl_why[i]), "its path is too long");
                break;
            }
            b->acl[i] = chat_aclfile_load(c->path, b->acl_why[i], sizeof(b->acl_why[i]));
            break;
        }
    }
}

/* dynamic-security's own check, once the broker has loaded it (after us,
 * where we come first: looked up when first needed). 2.0 loads plugins
 * with RTLD_GLOBAL, so it is there to call; its 2.0 form keeps its state in
 * globals and ignores userdata. 2.1 loads them RTLD_LOCAL (and exports its
 * own check). */
static MOSQ_FUNC_generic_callback dynsec_check(struct chat_broker *b)
{
    if (!b->dynsec && !b->v21 && b->emulate) {
        void *dyn = sym("dynsec__acl_check_callback");
        memcpy(&b->dynsec, &dyn, sizeof(dyn));
    }
    return b->dynsec;
}

/* Whether every checker after ours in l's chain can be worked out (or, for
 * the log at start, will be: dynamic-security loads after us). */
static bool chain_known_when(struct chat_broker *b, size_t i, bool at_start)
{
    const struct chat_bc_listener *l = &b->conf->listeners[i];
    if (!b->emulate || l->chain_cut || l->chat_pos < 0) {
        return false;
    }
    for (size_t k = (size_t)l->chat_pos + 1; k < l->n_chain; k++) {
        switch (l->chain[k].kind) {
        case CHAT_BC_DYNSEC:
            if (at_start ? b->v21 : !dynsec_check(b)) {
                return false;
            }
            break;
        case CHAT_BC_ACL_FILE:
            if (!b->acl[i]) {
                return false;
            }
            break;
        default:
            return false;
        }
    }
    return true;
}

/* Whether listeners a and b meet the same checkers in the same order. */
static bool same_chain(const struct chat_bc_listener *a, const struct chat_bc_listener *b)
{
    if (a->n_chain != b->n_chain || a->chain_cut != b->chain_cut || a->chat_pos != b->chat_pos) {
        return false;
    }
    for (size_t k = 0; k < a->n_chain; k++) {
        if (a->chain[k].kind != b->chain[k].kind ||
            strcmp(a->chain[k].path, b->chain[k].path) != 0) {
            return false;
        }
    }
    return true;
}

static bool chain_known(struct chat_broker *b, size_t i)
{
    return chain_known_when(b, i, false);
}

/* Whether a member without a username is named "~<client id>": wherever
 * some listener verifies usernames (or the configuration could not be
 * read), so that a client id never passes for a verified user. */
static bool tilde_names(const struct chat_broker *b)
{
    if (b->refused_conf) {
        return true;
    }
    for (size_t i = 0; i < b->conf->n_listeners; i++) {
        if (b->conf->listeners[i].verified) {
            return true;
        }
    }
    return false;
}

static void make_views(struct chat_plugin *pl, bool tighten_only)
{
    struct chat_broker *b = pl->broker;
    /* Once named with "~", always: names only ever tighten too. */
    pl->cfg.tilde_names = tilde_names(b) || (tighten_only && pl->cfg.tilde_names);
    b->uniform = true;
    for (size_t i = 1; i < b->conf->n_listeners; i++) {
        b->uniform = b->uniform && same_chain(&b->conf->listeners[0], &b->conf->listeners[i]);
    }
    for (size_t i = 0; i < b->conf->n_listeners; i++) {
        const struct chat_bc_listener *l = &b->conf->listeners[i];
        struct listener_view v = {
            .alone = pl->cfg.acl_mode == CHAT_ACL_ALLOW ||
                     (pl->cfg.acl_mode != CHAT_ACL_DEFER && !b->refused_conf && !chat_bc_others(l)),
            .verified = !b->refused_conf && l->verified,
        };
        if (tighten_only) {
            v.alone = v.alone && b->view[i].alone;
            v.verified = v.verified && b->view[i].verified;
        }
        b->view[i] = v;
    }
}

bool chat_broker_init(struct chat_plugin *pl)
{
    struct chat_broker *b = calloc(1, sizeof(*b));
    if (!b || !(b->conf = calloc(1, sizeof(*b->conf))) ||
        !(b->client_listener = chat_hmap_create())) {
        if (b) {
            free(b->conf);
        }
        free(b);
        return false;
    }
    pl->broker = b;
    b->thread = pthread_self();
    b->current = -1;
    void *port = sym("mosquitto_client_port");
    memcpy(&b->client_port, &port, sizeof(port));
    b->v21 = port != NULL;
    if (!env_on("MOSQUITTO_CHAT_TEST_NO_ACL_CHECK")) {
        void *check = sym("mosquitto_acl_check");
        if (b->v21) {
            memcpy(&b->check21, &check, sizeof(check));
        } else {
            memcpy(&b->check20, &check, sizeof(check));
        }
    }
    /* 2.0 loads plugins with RTLD_GLOBAL, so dynamic-security's check is
     * there to call; its 2.0 form keeps its state in globals and ignores
     * userdata. 2.1 loads them RTLD_LOCAL (and exports its own check). */
    b->emulate = !env_on("MOSQUITTO_CHAT_TEST_NO_EMULATION");
    b->refused_conf = !chat_broker_conf_scan(b->v21, b->conf);
    load_acl_files(b);
    make_views(pl, false);
    return true;
}

void chat_broker_free(struct chat_plugin *pl)
{
    struct chat_broker *b = pl->broker;
    if (!b) {
        return;
    }
    for (size_t i = 0; i < CHAT_BC_LISTENERS; i++) {
        chat_aclfile_free(b->acl[i]);
    }
    chat_hmap_destroy(b->client_listener, NULL);
    free(b->conf);
    free(b);
    pl->broker = NULL;
}

const char *chat_broker_check(struct chat_plugin *pl, char *buf, size_t len)
{
    struct chat_broker *b = pl->broker;
    if (b->refused_conf) {
        /* Without it nothing says whether another plugin answers first, nor
         * whether a listener (per_listener_settings) lacks mosquitto-chat. */
        snprintf(buf, len,
                 "cannot read the broker's configuration \"%s\" (%s) as the user the broker "
                 "runs as (plugins are loaded after it drops to that user): mosquitto-chat "
                 "cannot check that every client meets its checks first. Make the configuration "
                 "(and the files it includes) readable by that user, e.g. chgrp mosquitto and "
                 "chmod 640",
                 b->conf->unreadable, strerror(b->conf->err));
        return buf;
    }
    return chat_broker_conf_refusal(b->conf, buf, len);
}

void chat_broker_reload(struct chat_plugin *pl)
{
    struct chat_broker *b = pl->broker;
    struct chat_broker_conf *fresh = calloc(1, sizeof(*fresh));
    if (!fresh) {
        return;
    }
    bool readable = chat_broker_conf_scan(b->v21, fresh);
    /* The broker never opens or closes listeners nor loads plugins at a
     * reload: only the acl_file and the password files change. So each
     * listener keeps the plugins it was started with and takes the
     * acl_file the file names now; a layout that differs is not the
     * broker's, and only tightens (no listener is verified any more). */
    bool same = readable && fresh->n_listeners == b->conf->n_listeners;
    for (size_t i = 0; same && i < fresh->n_listeners; i++) {
        same = fresh->listeners[i].port == b->conf->listeners[i].port;
    }
    if (!readable) {
        b->refused_conf = true;
    }
    for (size_t i = 0; same && i < b->conf->n_listeners; i++) {
        struct chat_bc_listener *old = &b->conf->listeners[i];
        const struct chat_bc_listener *now = &fresh->listeners[i];
        size_t n = 0;
        for (size_t k = 0; k < old->n_chain; k++) {
            if (old->chain[k].kind != CHAT_BC_ACL_FILE) {
                old->chain[n++] = old->chain[k];
            }
        }
        for (size_t k = 0; k < now->n_chain && n < CHAT_BC_CHAIN; k++) {
            if (now->chain[k].kind == CHAT_BC_ACL_FILE) {
                old->chain[n++] = now->chain[k];
            }
        }
        old->n_chain = n;
        old->verified = old->verified && now->verified;
    }
    if (!same) {
        for (size_t i = 0; i < b->conf->n_listeners; i++) {
            b->conf->listeners[i].verified = false;
        }
    }
    free(fresh);
    load_acl_files(b);
    make_views(pl, true);
    chat_broker_log(pl);
}

void chat_broker_set_v21(struct chat_plugin *pl, bool v21)
{
    pl->broker->v21 = pl->broker->v21 || v21;
}

bool chat_broker_v21(const struct chat_plugin *pl)
{
    return pl->broker->v21;
}

void chat_broker_set_current(struct chat_plugin *pl, int listener)
{
    pl->broker->current = listener;
}

/* The listener the client came through, or -1 where the broker does not
 * say (then every listener counts, the most restrictive answer wins). */
static int listener_of(struct chat_plugin *pl, const struct mosquitto *client)
{
    struct chat_broker *b = pl->broker;
    const struct chat_broker_conf *c = b->conf;
    if (c->n_listeners == 1) {
        return 0;
    }
    if (b->client_port) {
        int port = b->client_port(client);
        int found = -1;
        for (size_t i = 0; i < c->n_listeners; i++) {
            if (c->listeners[i].port == port) {
                if (found >= 0) {
                    return -1; /* two listeners on one port (two addresses) */
                }
                found = (int)i;
            }
        }
        return found;
    }
    if (!c->per_listener) {
        return -1;
    }
    const char *id = mosquitto_client_id(client);
    if (b->current >= 0) {
        if (id) {
            /* Remembered for the work the tick does for this client. */
            (void)chat_hmap_put(b->client_listener, id, strlen(id),
                                (void *)(uintptr_t)(b->current + 1), NULL);
        }
        return b->current;
    }
    void *v = id ? chat_hmap_get(b->client_listener, id, strlen(id)) : NULL;
    return v ? (int)(uintptr_t)v - 1 : -1;
}

void chat_broker_forget_client(struct chat_plugin *pl, const char *client_id)
{
    (void)chat_hmap_remove(pl->broker->client_listener, client_id, strlen(client_id));
}

/* The view for client: its listener's, or every listener's combined. */
static struct listener_view view_of(struct chat_plugin *pl, const struct mosquitto *client,
                                    int *index)
{
    struct chat_broker *b = pl->broker;
    int i = listener_of(pl, client);
    *index = i;
    if (i >= 0) {
        return b->view[i];
    }
    struct listener_view all = {.alone = true, .verified = true};
    for (size_t k = 0; k < b->conf->n_listeners; k++) {
        all.alone = all.alone && b->view[k].alone;
        all.verified = all.verified && b->view[k].verified;
    }
    /* Where every listener meets the same checkers (per_listener_settings
     * false, no plugin_use), any one's chain is the client's; else no one's
     * (*index stays -1: nothing is worked out). */
    if (b->uniform && b->conf->n_listeners > 0) {
        *index = 0;
    }
    return all;
}

bool chat_broker_all_alone(const struct chat_plugin *pl)
{
    const struct chat_broker *b = pl->broker;
    for (size_t k = 0; k < b->conf->n_listeners; k++) {
        if (!b->view[k].alone) {
            return false;
        }
    }
    return b->conf->n_listeners > 0 || pl->cfg.acl_mode == CHAT_ACL_ALLOW;
}

bool chat_broker_alone(struct chat_plugin *pl, const struct mosquitto *client)
{
    int i;
    return view_of(pl, client, &i).alone;
}

bool chat_broker_verified(struct chat_plugin *pl, const struct mosquitto *client)
{
    int i;
    return view_of(pl, client, &i).verified;
}

bool chat_broker_chain_known(struct chat_plugin *pl, const struct mosquitto *client)
{
    int i;
    (void)view_of(pl, client, &i);
    return i >= 0 && chain_known(pl->broker, (size_t)i);
}

bool chat_broker_ask(struct chat_plugin *pl, struct mosquitto *client, const char *topic,
                     int access, int *rc)
{
    struct chat_broker *b = pl->broker;
    if (b->check21) {
        *rc = b->check21(client, topic, 0, NULL, 0, false, NULL, access);
        return true;
    }
    if (b->check20) {
        *rc = b->check20(client, topic, 0, NULL, 0, false, access);
        return true;
    }
    return false;
}

bool chat_broker_emulate(struct chat_plugin *pl, struct mosquitto *client, const char *topic,
                         int access, int *rc)
{
    struct chat_broker *b = pl->broker;
    int i = 0;
    (void)view_of(pl, client, &i);
    if (i < 0 || !chain_known(b, (size_t)i)) {
        return false;
    }
    const struct chat_bc_listener *l = &b->conf->listeners[i];
    for (size_t k = (size_t)l->chat_pos + 1; k < l->n_chain; k++) {
        if (l->chain[k].kind == CHAT_BC_DYNSEC) {
            struct mosquitto_evt_acl_check ev;
            memset(&ev, 0, sizeof(ev));
            ev.client = client;
            ev.topic = topic;
            ev.access = access;
            int r = dynsec_check(b)(MOSQ_EVT_ACL_CHECK, &ev, NULL);
            if (r != MOSQ_ERR_PLUGIN_DEFER) {
                *rc = r;
                return true;
            }
        } else {
            /* acl_file: every (un)subscribe allowed, reads by its rules;
             * it never defers. */
            bool ok = access == MOSQ_ACL_SUBSCRIBE || access == MOSQ_ACL_UNSUBSCRIBE ||
                      chat_aclfile_allows(b->acl[i], mosquitto_client_username(client),
                                          mosquitto_client_id(client), topic, access);
            *rc = ok ? MOSQ_ERR_SUCCESS : MOSQ_ERR_ACL_DENIED;
            return true;
        }
    }
    /* Every checker after ours deferred: the broker denies. */
    *rc = MOSQ_ERR_ACL_DENIED;
    return true;
}

void chat_broker_log(struct chat_plugin *pl)
{
    struct chat_broker *b = pl->broker;
    for (size_t i = 0; i < b->conf->n_listeners; i++) {
        const struct chat_bc_listener *l = &b->conf->listeners[i];
        const struct listener_view *v = &b->view[i];
        mosquitto_log_printf(
            MOSQ_LOG_INFO, "mosquitto-chat: %s %d: access checks %s; usernames %s; history: %s%s%s",
            l->is_default ? "default listener, port" : "listener", l->port,
            v->alone ? "answered by mosquitto-chat alone (allow outside chat)"
                     : "deferred to the broker's other checkers",
            v->verified ? "verified by the broker (admins and closed groups work)"
                        : "not verified by the broker: admin commands and closed groups are "
                          "refused",
            v->alone                                  ? "to members"
            : pl->cfg.read_check == CHAT_READ_MEMBERS ? "to members (plugin_opt_read_check members)"
            : (b->check20 || b->check21)              ? "to members the broker lets read the group"
            : chain_known_when(b, i, true)
                ? "to members the broker lets read the group (worked out from its "
                  "acl_file/dynamic-security)"
                : "refused: the broker cannot be asked whether a client may read a group "
                  "(see plugin_opt_read_check)",
            b->acl_why[i][0] ? "; acl_file not usable: " : "", b->acl_why[i]);
    }
    if (b->refused_conf) {
        mosquitto_log_printf(MOSQ_LOG_WARNING,
                             "mosquitto-chat: cannot read the broker's configuration \"%s\" (%s) "
                             "as the user the broker runs as: deferring every access check "
                             "outside chat, and treating usernames as unverified; make the file "
                             "readable by that user, or set plugin_opt_acl",
                             b->conf->unreadable, strerror(b->conf->err));
    }
}

bool chat_broker_on_thread(const struct chat_plugin *pl)
{
    return pthread_equal(pthread_self(), pl->broker->thread);
}

int chat_broker_sys_interval(const struct chat_plugin *pl)
{
    return pl->broker->conf->sys_interval;
}

bool chat_broker_per_listener(const struct chat_plugin *pl)
{
    return pl->broker->conf->per_listener;
}

/* The listener of the k-th plugin instance on 2.0 with
 * per_listener_settings true: the broker initialises plugins listener by
 * listener, in the order of its listeners (the default one last). */
int chat_broker_instance_listener(const struct chat_plugin *pl, unsigned k)
{
    const struct chat_broker_conf *c = pl->broker->conf;
    if (!c->per_listener || pl->broker->v21) {
        return -1;
    }
    unsigned seen = 0;
    for (size_t i = 0; i < c->n_listeners; i++) {
        if (c->listeners[i].chat_pos >= 0 && seen++ == k) {
            return (int)i;
        }
    }
    return -1;
}

void chat_broker_set_test(struct chat_plugin *pl, bool alone, bool verified,
                          chat_broker_check_fn check)
{
    struct chat_broker *b = pl->broker;
    memset(b->conf, 0, sizeof(*b->conf));
    b->conf->readable = true;
    b->conf->sys_interval = 10;
    b->conf->n_listeners = 1;
    struct chat_bc_listener *l = &b->conf->listeners[0];
    l->port = 1883;
    l->is_default = true;
    l->chain[0].kind = CHAT_BC_CHAT;
    l->n_chain = 1;
    if (!alone) {
        /* behind a checker that cannot be worked out */
        l->chain[1].kind = CHAT_BC_PLUGIN;
        snprintf(l->chain[1].path, sizeof(l->chain[1].path), "test");
        l->n_chain = 2;
    }
    l->verified = verified;
    b->refused_conf = false;
    b->emulate = true;
    b->check20 = check;
    b->check21 = NULL;
    b->dynsec = NULL;
    load_acl_files(b);
    make_views(pl, false);
    if (pl->verdicts) {
        chat_verdict_changed(pl);
    }
}
