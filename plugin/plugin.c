/* plugin.c: the three Mosquitto plugin entry points, the dispatch of broker
 * events, and the one plugin state that every instance the broker loads
 * shares.
 *
 * Instances: with per_listener_settings true a Mosquitto plugin serves only
 * the listener whose section names it, so mosquitto-chat is named under
 * every listener (broker.c refuses to start otherwise) and the broker calls
 * mosquitto_plugin_init once per listener. The first call makes the plugin
 * (options, store, module states); each later one attaches to it with
 * identical options (or none), registering the same callbacks with its own
 * userdata, a struct chat_instance that says which listener it serves. */
#include "access.h"
#include "push.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One mosquitto_plugin_init: the shared plugin and the listener it serves
 * (-1 where the broker says it otherwise, or all). */
struct chat_instance {
    struct chat_plugin *pl;
    mosquitto_plugin_id_t *pid;
    int listener;
    bool first; /* the instance that made pl: it alone takes ticks and reloads */
};

/* The plugin every instance shares, the options it was made with (to hold
 * the later instances' to), and the instances alive and ever made. */
static struct chat_plugin *g_plugin;
static char **g_options; /* "key=value", NULL-terminated */
static unsigned g_instances, g_made;

/* What a reload callback returns to let the callbacks after it see the
 * reload too: 2.0 goes on while they answer "defer" and stops at anything
 * else; 2.1 goes on while they answer "success" and logs any other answer
 * as an error and stops the broker. */
static int g_reload_go_on = MOSQ_ERR_PLUGIN_DEFER;

/* 2.1's MOSQ_EVT_CONNECT, and MQTT's reason for a session taken over. */
#define CHAT_EVT_CONNECT 11
struct chat_evt_connect {
    void *future;
    struct mosquitto *client;
    void *future2[4];
};
#define CHAT_RC_TAKEN_OVER 142

/* The connection whose disconnect (or offline) event was the broker's last
 * event to the plugin. Mosquitto (2.0.11 to 2.1.2, context__disconnect)
 * sends that event, then checks the client's Will for writing and publishes
 * it: a write check of that connection right after it is its Will's, since
 * a gone connection publishes nothing else. Any other event clears it. */
static const struct mosquitto *g_will_of;

/* The start of an event from the broker: the periodic work that runs from
 * events while the broker sends no tick (any client's, so before the
 * event's listener is known), then the listener the event came through. */
static struct chat_plugin *enter(void *userdata)
{
    struct chat_instance *in = userdata;
    g_will_of = NULL;
    chat_broker_set_current(in->pl, -1);
    chat_tick_from_event(in->pl);
    chat_broker_set_current(in->pl, in->listener);
    return in->pl;
}

/* The end of it: nothing after it runs as that listener's. */
static int leave(struct chat_plugin *pl, int rc)
{
    chat_broker_set_current(pl, -1);
    return rc;
}

/* An event of client (own: its own doing, a publish, a subscribe, a
 * request, a connect; else a delivery to it, which the broker also asks
 * for a session away, to queue it): a persistent session that comes back
 * without subscribing again gets its catch-up and presence again; one the
 * plugin does not know (the broker restarted, or it was forgotten) gets the
 * catch-up of the groups it has cursors in. */
static void seen(struct chat_plugin *pl, struct mosquitto *client, bool own)
{
    const char *id = client ? mosquitto_client_id(client) : NULL;
    if (!id) {
        return;
    }
    if (chat_peer_back(pl, client, own)) {
        chat_client_back(pl, client);
        return;
    }
    /* A delivery alone proves a connection only where the connection was
     * made in this process: a session the broker restored from its
     * persistence has no address until its client connects. */
    if (!mosquitto_client_clean_session(client) && !chat_peer_known(pl, id) &&
        (own || mosquitto_client_address(client)) && chat_peer_note(pl, client)) {
        chat_client_resume(pl, client);
    }
}

static int on_acl(int event, void *event_data, void *userdata)
{
    struct chat_instance *in = userdata;
    struct mosquitto_evt_acl_check *ev = event_data;
    (void)event;
    if (!chat_broker_on_thread(in->pl)) {
        /* A 2.1 http_api listener asks from its own thread, for a URL: none
         * of ours, and no state of the plugin may be touched there. */
        return CHAT_PLUGIN_IGNORE;
    }
    struct chat_plugin *pl = in->pl;
    if (chat_verdict_probing(pl)) {
        /* Our own question (verdict.c), inside an event: the other
         * checkers answer it. */
        return chat_access_aside(pl);
    }
    bool will = ev->access == MOSQ_ACL_WRITE && ev->client == g_will_of;
    pl = enter(userdata);
    if (will && chat_will_refused(pl, ev->client, ev->topic)) {
        return leave(pl, MOSQ_ERR_ACL_DENIED);
    }
    seen(pl, ev->client, ev->access != MOSQ_ACL_READ);
    return leave(pl, chat_on_acl(pl, ev));
}

static int on_message(int event, void *event_data, void *userdata)
{
    struct chat_plugin *pl = enter(userdata);
    struct mosquitto_evt_message *ev = event_data;
    (void)event;
    seen(pl, ev->client, true);
    return leave(pl, chat_on_message(pl, ev));
}

static int on_control(int event, void *event_data, void *userdata)
{
    struct chat_plugin *pl = enter(userdata);
    struct mosquitto_evt_control *ev = event_data;
    (void)event;
    seen(pl, ev->client, true);
    return leave(pl, chat_on_control(pl, ev));
}

static int on_tick(int event, void *event_data, void *userdata)
{
    struct chat_plugin *pl = enter(userdata);
    (void)event;
    (void)event_data;
    chat_broker_set_current(pl, -1);
    chat_takeover_tick(pl);
    chat_tick_from_broker(pl);
    return leave(pl, MOSQ_ERR_SUCCESS);
}

/* Push configured where nobody may be woken: said at start and reload. */
static void log_wake(struct chat_plugin *pl)
{
    const char *why = pl->push ? chat_access_wake(pl) : NULL;
    if (why) {
        mosquitto_log_printf(MOSQ_LOG_WARNING, "mosquitto-chat: %s", why);
    }
}

/* A client went away (how): it is offline for presence, its catch-up
 * stops, and the peer table keeps what its session keeps. */
static void client_gone(struct chat_plugin *pl, struct mosquitto *client, enum chat_gone how)
{
    const char *id = mosquitto_client_id(client);
    if (!chat_takeover_holder(pl, client)) {
        return; /* refused: the id is another connection's (takeover.c) */
    }
    chat_takeover_gone(pl, client);
    if (id) {
        chat_replay_held_drop(pl, id); /* answers held for it go nowhere */
        chat_replay_stop(pl, id, NULL);
        chat_presence_disconnected(pl, id);
        chat_push_disconnected(pl, id);
        chat_verdict_forget_client(pl, id);
        chat_broker_forget_client(pl, id);
        chat_peer_disconnected(pl, client, how);
    }
    chat_broker_set_current(pl, -1);
}

static int on_disconnect(int event, void *event_data, void *userdata)
{
    struct chat_plugin *pl = enter(userdata);
    struct mosquitto_evt_disconnect *ev = event_data;
    enum chat_gone how = CHAT_GONE_ENDED;
    (void)event;
    if (chat_broker_v21(pl)) {
        /* 2.1 sends this event only for sessions that end now, and for the
         * old connection of a session a new one takes over or resumes. */
        how = ev->reason == CHAT_RC_TAKEN_OVER ? CHAT_GONE_REPLACED : CHAT_GONE_ENDED;
    } else if (chat_peer_offline(pl, ev->client)) {
        /* 2.0: the connection a persistent session left, closed as the
         * session resumes in a new one. */
        how = CHAT_GONE_REPLACED;
    } else if (!mosquitto_client_clean_session(ev->client) ||
               mosquitto_client_protocol_version(ev->client) == 5) {
        /* 2.0 shows an MQTT 5 client's Clean Start, not whether its session
         * outlives the connection (its Session Expiry Interval): kept as
         * away, which a clean start forgets when it comes back. */
        how = CHAT_GONE_OFFLINE;
    }
    client_gone(pl, ev->client, how);
    g_will_of = ev->client;
    return leave(pl, MOSQ_ERR_SUCCESS);
}

/* 2.1 on: a client whose session outlives its connection went away (2.1
 * sends no disconnect event for it). */
static int on_client_offline(int event, void *event_data, void *userdata)
{
    struct chat_plugin *pl = enter(userdata);
    struct chat_evt_client_offline *ev = event_data;
    (void)event;
    client_gone(pl, ev->client, CHAT_GONE_OFFLINE);
    g_will_of = ev->client;
    return leave(pl, MOSQ_ERR_SUCCESS);
}

/* 2.1 on: a client connected (authenticated, its session resumed). */
static int on_connect(int event, void *event_data, void *userdata)
{
    struct chat_plugin *pl = enter(userdata);
    struct chat_evt_connect *ev = event_data;
    (void)event;
    chat_takeover_connected(pl, ev->client);
    seen(pl, ev->client, true);
    return leave(pl, MOSQ_ERR_SUCCESS);
}

/* 2.1 on, the broker's password check, before a connection takes a client
 * id over (takeover.c): only a refusal is ours; otherwise the plugin is not
 * there for it (2.1's "ignore"), so that the broker's own rules (its
 * password file, anonymous access) decide as without the plugin. Not
 * registered on 2.0, where a plugin's "defer" is itself a refusal of any
 * client that gives a username when no password checker follows. */
static int on_basic_auth(int event, void *event_data, void *userdata)
{
    struct chat_plugin *pl = enter(userdata);
    struct mosquitto_evt_basic_auth *ev = event_data;
    (void)event;
    int rc =
        chat_takeover_refused(pl, ev->client, ev->username) ? MOSQ_ERR_AUTH : CHAT_PLUGIN_IGNORE;
    return leave(pl, rc);
}

/* SIGHUP: the broker reads its configuration again, then re-registers its
 * own acl_file check after this event. An acl_file added since we started
 * must find us deferring to it, never allowing in its place (broker.c only
 * ever tightens), and every remembered read verdict is asked again. */
static int on_reload(int event, void *event_data, void *userdata)
{
    struct chat_plugin *pl = enter(userdata);
    (void)event;
    (void)event_data;
    chat_broker_reload(pl);
    log_wake(pl);
    pl->cfg.sys_interval = chat_broker_sys_interval(pl);
    chat_verdict_changed(pl);
    return leave(pl, g_reload_go_on);
}

enum reg_flags {
    REG_ALWAYS = 0,
    REG_NEWER = 1,  /* an event older brokers do not have: refused there, not needed */
    REG_FIRST = 2,  /* the first instance only (the broker sends these to each) */
    REG_SHARED = 4, /* one per broker on 2.1 (global): a later instance's is refused */
    REG_V21 = 8     /* 2.1 on only (known once CHAT_EVT_CLIENT_OFFLINE registered) */
};

struct registration {
    int event;
    MOSQ_FUNC_generic_callback cb;
    const void *data;
    unsigned flags;
};

static const struct registration callbacks[] = {
    {MOSQ_EVT_ACL_CHECK, on_acl, NULL, REG_ALWAYS},
    {MOSQ_EVT_MESSAGE, on_message, NULL, REG_ALWAYS},
    {MOSQ_EVT_CONTROL, on_control, CHAT_CONTROL_TOPIC, REG_SHARED},
    {MOSQ_EVT_TICK, on_tick, NULL, REG_FIRST},
    {MOSQ_EVT_DISCONNECT, on_disconnect, NULL, REG_ALWAYS},
    {MOSQ_EVT_RELOAD, on_reload, NULL, REG_FIRST},
    {CHAT_EVT_CLIENT_OFFLINE, on_client_offline, NULL, REG_NEWER},
    {CHAT_EVT_CONNECT, on_connect, NULL, REG_NEWER},
    {MOSQ_EVT_BASIC_AUTH, on_basic_auth, NULL, REG_V21},
};
#define CALLBACK_COUNT (sizeof(callbacks) / sizeof(callbacks[0]))

/* Unregisters what in registered (the first count of callbacks[]); the
 * broker ignores an unregistration of what it never registered. */
static void unregister(struct chat_instance *in, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        mosquitto_callback_unregister(in->pid, callbacks[i].event, callbacks[i].cb,
                                      callbacks[i].data);
    }
}

/* Registers every callback for in; on failure unregisters them and returns
 * the broker's error. */
static int register_all(struct chat_instance *in)
{
    size_t i = 0;
    for (; i < CALLBACK_COUNT; i++) {
        const struct registration *r = &callbacks[i];
        if (((r->flags & REG_FIRST) && !in->first) ||
            ((r->flags & REG_V21) && !chat_broker_v21(in->pl))) {
            continue;
        }
        int rc = mosquitto_callback_register(in->pid, r->event, r->cb, r->data, in);
        if (r->event == CHAT_EVT_CLIENT_OFFLINE && in->first) {
            /* 2.1's dispatch came with 2.1's events. */
            bool v21 = rc == MOSQ_ERR_SUCCESS;
            chat_broker_set_v21(in->pl, v21);
            g_reload_go_on =
                v21 || chat_broker_v21(in->pl) ? MOSQ_ERR_SUCCESS : MOSQ_ERR_PLUGIN_DEFER;
        }
        if ((rc == MOSQ_ERR_NOT_SUPPORTED && (r->flags & REG_NEWER)) ||
            (rc == MOSQ_ERR_ALREADY_EXISTS && (r->flags & REG_SHARED) && !in->first)) {
            continue;
        }
        if (rc != MOSQ_ERR_SUCCESS) {
            mosquitto_log_printf(MOSQ_LOG_ERR,
                                 "mosquitto-chat: cannot register callback for event %d: error %d",
                                 r->event, rc);
            unregister(in, i);
            return rc;
        }
    }
    return MOSQ_ERR_SUCCESS;
}

bool chat_states_init(struct chat_plugin *pl)
{
    return chat_tick_init(pl) && chat_health_init(pl) && chat_broker_init(pl) &&
           chat_verdict_init(pl) && chat_envelope_cache_init(pl) && chat_peers_init(pl) &&
           chat_replay_init(pl) && chat_presence_init(pl) && chat_fanout_init(pl) &&
           chat_retention_init(pl) && chat_expiry_init(pl) && chat_admin_init(pl) &&
           chat_takeover_init(pl) && chat_control_change_init(pl);
}

void chat_states_free(struct chat_plugin *pl)
{
    /* Push first: its sender thread stops before anything it was given
     * goes (chat_push_init, which reads the options, made it). */
    chat_push_free(pl);
    chat_takeover_free(pl);
    /* The callers first (a catch-up stops before the peers go), the
     * health last: freeing may still log a store error. */
    chat_control_change_free(pl);
    chat_admin_free(pl);
    chat_expiry_free(pl);
    chat_retention_free(pl);
    chat_relay_free(pl);
    chat_fanout_free(pl);
    chat_presence_free(pl);
    chat_replay_free(pl);
    chat_peers_free(pl);
    chat_envelope_cache_free(pl);
    chat_verdict_free(pl);
    chat_broker_free(pl);
    chat_health_free(pl);
    chat_tick_free(pl);
}

static void plugin_free(struct chat_plugin *pl)
{
    if (!pl) {
        return;
    }
    chat_tick_report(pl);
    chat_states_free(pl);
    if (pl->store) {
        chat_store_sync(pl->store);
    }
    chat_store_close(pl->store);
    chat_config_free(&pl->cfg);
    free(pl);
}

static void options_free(char **opts)
{
    for (char **o = opts; o && *o; o++) {
        free(*o);
    }
    free(opts);
}

/* The options as "key=value" strings (NULL-terminated, malloc'd), or NULL
 * when out of memory. */
static char **options_copy(const struct mosquitto_opt *options, int count)
{
    char **out = calloc((size_t)(count > 0 ? count : 0) + 1, sizeof(*out));
    for (int i = 0; out && i < count; i++) {
        const char *k = options[i].key ? options[i].key : "";
        const char *v = options[i].value ? options[i].value : "";
        size_t n = strlen(k) + strlen(v) + 2;
        if (!(out[i] = malloc(n))) {
            options_free(out);
            return NULL;
        }
        snprintf(out[i], n, "%s=%s", k, v);
    }
    return out;
}

/* A later instance names no options, or the first's, in the same order. */
static bool options_match(const struct mosquitto_opt *options, int count)
{
    if (count == 0) {
        return true;
    }
    char **mine = options_copy(options, count);
    bool same = mine != NULL;
    int i = 0;
    for (; same && i < count; i++) {
        same = g_options[i] && !strcmp(mine[i], g_options[i]);
    }
    same = same && !g_options[i];
    options_free(mine);
    return same;
}

CHAT_EXPORT int mosquitto_plugin_version(int supported_version_count, const int *supported_versions)
{
    for (int i = 0; i < supported_version_count; i++) {
        if (supported_versions[i] == 5) {
            return 5;
        }
    }
    return -1;
}

/* Makes the plugin of the first instance: options, the broker's
 * configuration checked, module states, the store. Returns the plugin, or
 * NULL with *rc the broker's error. */
static struct chat_plugin *plugin_make(struct mosquitto_opt *options, int option_count, int *rc)
{
    struct chat_plugin *pl = calloc(1, sizeof(*pl));
    char *errmsg = NULL;
    char refusal[1024];

    *rc = MOSQ_ERR_NOMEM;
    if (!pl) {
        return NULL;
    }
    *rc = chat_config_parse(&pl->cfg, options, option_count);
    if (*rc != MOSQ_ERR_SUCCESS) {
        goto fail;
    }
    chat_clock_init();
    *rc = chat_push_init(pl, options, option_count);
    if (*rc != MOSQ_ERR_SUCCESS) {
        goto fail;
    }
    *rc = MOSQ_ERR_NOMEM;
    if (!chat_states_init(pl)) {
        goto fail;
    }
    pl->cfg.sys_interval = chat_broker_sys_interval(pl);
    /* Never run with our checks silently skipped. */
    const char *why = chat_broker_check(pl, refusal, sizeof(refusal));
    if (why) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: not starting: %s", why);
        *rc = MOSQ_ERR_INVAL;
        goto fail;
    }
    log_wake(pl);
    if (chat_broker_per_listener(pl)) {
        /* Mosquitto 2.0.11 never sends plugins a tick with
         * per_listener_settings true (src/plugin.c, fixed in later 2.0.x):
         * until one comes, the chores run from client events, and fsync
         * batch syncs each append as always would. */
        mosquitto_log_printf(MOSQ_LOG_WARNING,
                             "mosquitto-chat: per_listener_settings true: until the broker sends "
                             "a tick (2.0.11 sends none), timeouts and retention run from client "
                             "events and fsync batch syncs every message");
    }
    chat_err err = chat_health_open(pl, &errmsg);
    if (err != CHAT_OK) {
        /* One line: the path, the cause, and what to do about damage. */
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: cannot open store \"%s\": %s%s",
                             chat_health_where(pl), errmsg ? errmsg : chat_strerror(err),
                             err == CHAT_ECORRUPT
                                 ? "; stop the broker and repair the store (\"A damaged "
                                   "store\" in mosquitto-chat's protocol.md)"
                                 : "");
        free(errmsg);
        *rc = MOSQ_ERR_UNKNOWN;
        goto fail;
    }
    if (!chat_health_opened(pl)) {
        *rc = MOSQ_ERR_NOMEM;
        goto fail;
    }
    *rc = MOSQ_ERR_SUCCESS;
    return pl;

fail:
    plugin_free(pl);
    return NULL;
}

CHAT_EXPORT int mosquitto_plugin_init(mosquitto_plugin_id_t *identifier, void **userdata,
                                      struct mosquitto_opt *options, int option_count)
{
    struct chat_instance *in = calloc(1, sizeof(*in));
    int rc = MOSQ_ERR_NOMEM;

    if (!in) {
        return MOSQ_ERR_NOMEM;
    }
    in->pid = identifier;
    if (g_plugin) {
        if (!options_match(options, option_count)) {
            mosquitto_log_printf(MOSQ_LOG_ERR,
                                 "mosquitto-chat: not starting: mosquitto-chat is loaded more "
                                 "than once (one plugin line per listener) with different "
                                 "plugin_opt_ lines: give them to the first plugin line only, or "
                                 "the same to every one");
            free(in);
            return MOSQ_ERR_INVAL;
        }
        in->pl = g_plugin;
    } else {
        if (!(g_options = options_copy(options, option_count))) {
            free(in);
            return MOSQ_ERR_NOMEM;
        }
        if (!(in->pl = plugin_make(options, option_count, &rc))) {
            options_free(g_options);
            g_options = NULL;
            free(in);
            return rc;
        }
        in->first = true;
    }
    in->listener = chat_broker_instance_listener(in->pl, g_made);
    if ((rc = register_all(in)) != MOSQ_ERR_SUCCESS) {
        if (in->first) {
            plugin_free(in->pl);
            options_free(g_options);
            g_options = NULL;
        }
        free(in);
        return rc;
    }
    if (in->first) {
        g_plugin = in->pl;
        chat_config_log(&in->pl->cfg, chat_health_where(in->pl));
        chat_broker_log(in->pl);
    }
    g_made++;
    g_instances++;
    *userdata = in;
    return MOSQ_ERR_SUCCESS;
}

CHAT_EXPORT int mosquitto_plugin_cleanup(void *userdata, struct mosquitto_opt *options,
                                         int option_count)
{
    struct chat_instance *in = userdata;
    (void)options;
    (void)option_count;
    if (!in) {
        return MOSQ_ERR_SUCCESS;
    }
    unregister(in, CALLBACK_COUNT);
    free(in);
    if (g_instances > 0 && --g_instances == 0) {
        plugin_free(g_plugin);
        g_plugin = NULL;
        options_free(g_options);
        g_options = NULL;
        g_made = 0;
    }
    return MOSQ_ERR_SUCCESS;
}
