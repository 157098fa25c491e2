/* plugin.c: the three Mosquitto plugin entry points and event dispatch. */
#include "plugin.h"

#include <stdlib.h>
#include <string.h>

static int on_acl(int event, void *event_data, void *userdata)
{
    (void)event;
    return chat_on_acl(userdata, event_data);
}

static int on_message(int event, void *event_data, void *userdata)
{
    (void)event;
    return chat_on_message(userdata, event_data);
}

static int on_control(int event, void *event_data, void *userdata)
{
    (void)event;
    return chat_on_control(userdata, event_data);
}

static int on_tick(int event, void *event_data, void *userdata)
{
    (void)event;
    (void)event_data;
    chat_tick_from_broker(userdata);
    return MOSQ_ERR_SUCCESS;
}

/* What a reload callback returns to let the plugins after it see the reload
 * too: 2.0 goes on while they answer "defer" and stops at anything else;
 * 2.1 goes on while they answer "success" and stops, logging an error, at
 * anything else, which would keep its own acl_file and password_file (its
 * builtin-security plugin, after us) from being read again. Set at init from
 * whether the broker has 2.1's events (MOSQ_EVT_CLIENT_OFFLINE), which came
 * with 2.1's dispatch. */
static int g_reload_go_on = MOSQ_ERR_PLUGIN_DEFER;

/* A client went away: it is offline for presence and its catch-up stops;
 * peers.c keeps what its session keeps. */
static void client_gone(struct chat_plugin *pl, struct mosquitto *client)
{
    const char *id = mosquitto_client_id(client);
    if (id) {
        chat_replay_stop(pl, id, NULL);
        chat_presence_disconnected(pl, id);
        chat_peer_disconnected(pl, client);
    }
    chat_tick_from_event(pl);
}

static int on_disconnect(int event, void *event_data, void *userdata)
{
    struct mosquitto_evt_disconnect *ev = event_data;
    (void)event;
    client_gone(userdata, ev->client);
    return MOSQ_ERR_SUCCESS;
}

/* 2.1 on: a client whose session outlives the connection went away (2.0 and
 * 2.1 send MOSQ_EVT_DISCONNECT for the others; 2.0 sends it for these too). */
static int on_client_offline(int event, void *event_data, void *userdata)
{
    struct chat_evt_client_offline *ev = event_data;
    (void)event;
    client_gone(userdata, ev->client);
    return MOSQ_ERR_SUCCESS;
}

/* SIGHUP: the broker reads its configuration again, then re-registers its
 * own acl_file check after this event. An acl_file or plugin added since we
 * started must find us deferring to it, never allowing in its place. */
static int on_reload(int event, void *event_data, void *userdata)
{
    struct chat_plugin *pl = userdata;
    struct chat_broker_conf bc;
    enum chat_acl_mode before = pl->cfg.acl_mode;
    bool names_before = pl->cfg.names_verified;
    (void)event;
    (void)event_data;
    chat_broker_scan(&bc);
    chat_config_apply_broker(&pl->cfg, &bc, true);
    /* Only ever tighten: the broker keeps its old configuration when it
     * refuses the new one (an unknown option, a missing file), and nothing
     * tells us whether it did. A removed acl_file takes effect for us at the
     * next start. */
    if (before == CHAT_ACL_DEFER && pl->cfg.acl_mode == CHAT_ACL_ALLOW) {
        pl->cfg.acl_mode = CHAT_ACL_DEFER;
        mosquitto_log_printf(MOSQ_LOG_NOTICE,
                             "mosquitto-chat: after reload the configuration names no other "
                             "access checker; mosquitto-chat keeps deferring until restarted");
    }
    pl->cfg.names_verified = pl->cfg.names_verified || names_before;
    if (pl->cfg.acl_mode != before || pl->cfg.names_verified != names_before) {
        mosquitto_log_printf(MOSQ_LOG_NOTICE,
                             "mosquitto-chat: after reload, access checks: %s; members without "
                             "a username: %s",
                             pl->cfg.acl_mode == CHAT_ACL_ALLOW ? "allow outside chat"
                                                                : "defer to the broker's",
                             pl->cfg.names_verified ? "~<client id>" : "<client id>");
    }
    /* Let every other plugin see the reload too. */
    return g_reload_go_on;
}

struct registration {
    int event;
    MOSQ_FUNC_generic_callback cb;
    const void *data;
    bool optional; /* an event older brokers do not have: refused there, not needed */
};

static const struct registration callbacks[] = {
    {MOSQ_EVT_ACL_CHECK, on_acl, NULL, false},
    {MOSQ_EVT_MESSAGE, on_message, NULL, false},
    {MOSQ_EVT_CONTROL, on_control, CHAT_CONTROL_TOPIC, false},
    {MOSQ_EVT_TICK, on_tick, NULL, false},
    {MOSQ_EVT_DISCONNECT, on_disconnect, NULL, false},
    {MOSQ_EVT_RELOAD, on_reload, NULL, false},
    {CHAT_EVT_CLIENT_OFFLINE, on_client_offline, NULL, true},
};
#define CALLBACK_COUNT (sizeof(callbacks) / sizeof(callbacks[0]))

static void unregister(struct chat_plugin *pl, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        mosquitto_callback_unregister(pl->pid, callbacks[i].event, callbacks[i].cb,
                                      callbacks[i].data);
    }
}

bool chat_states_init(struct chat_plugin *pl)
{
    return chat_tick_init(pl) && chat_health_init(pl) && chat_access_init(pl) &&
           chat_envelope_cache_init(pl) && chat_peers_init(pl) && chat_replay_init(pl) &&
           chat_presence_init(pl) && chat_retention_init(pl) && chat_expiry_init(pl) &&
           chat_admin_init(pl);
}

void chat_states_free(struct chat_plugin *pl)
{
    /* The callers first (a catch-up stops before the peers go), the
     * health last: freeing may still log a store error. */
    chat_admin_free(pl);
    chat_expiry_free(pl);
    chat_retention_free(pl);
    chat_relay_free(pl);
    chat_presence_free(pl);
    chat_replay_free(pl);
    chat_peers_free(pl);
    chat_envelope_cache_free(pl);
    chat_access_free(pl);
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

CHAT_EXPORT int mosquitto_plugin_version(int supported_version_count, const int *supported_versions)
{
    for (int i = 0; i < supported_version_count; i++) {
        if (supported_versions[i] == 5) {
            return 5;
        }
    }
    return -1;
}

CHAT_EXPORT int mosquitto_plugin_init(mosquitto_plugin_id_t *identifier, void **userdata,
                                      struct mosquitto_opt *options, int option_count)
{
    struct chat_plugin *pl = NULL;
    char *errmsg = NULL;
    size_t registered = 0;
    int rc = MOSQ_ERR_INVAL;

    pl = calloc(1, sizeof(*pl));
    if (!pl) {
        return MOSQ_ERR_NOMEM;
    }
    pl->pid = identifier;
    rc = chat_config_parse(&pl->cfg, options, option_count);
    if (rc != MOSQ_ERR_SUCCESS) {
        goto fail;
    }
    struct chat_broker_conf bc;
    chat_broker_scan(&bc);
    chat_config_apply_broker(&pl->cfg, &bc, true);
    chat_clock_init();
    if (bc.per_listener) {
        /* Mosquitto 2.0.11 never sends plugins a tick with
         * per_listener_settings true (src/plugin.c, fixed in later 2.0.x):
         * until one comes, the chores run from client events, and fsync
         * batch syncs each append as always would. */
        mosquitto_log_printf(MOSQ_LOG_WARNING,
                             "mosquitto-chat: per_listener_settings true: until the broker sends "
                             "a tick (2.0.11 sends none), timeouts and retention run from client "
                             "events and fsync batch syncs every message");
    }
    rc = MOSQ_ERR_NOMEM;
    if (!chat_states_init(pl)) {
        goto fail;
    }
    chat_access_set_broker_check(pl, chat_broker_acl_check());
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
        rc = MOSQ_ERR_UNKNOWN;
        goto fail;
    }
    /* Last-use stamps of devices follow the plugin's clock (device expiry). */
    if (!chat_relay_init(pl)) {
        rc = MOSQ_ERR_NOMEM;
        goto fail;
    }
    if (chat_store_recovered(pl->store)) {
        mosquitto_log_printf(MOSQ_LOG_WARNING,
                             "mosquitto-chat: the store \"%s\" was not closed cleanly and the "
                             "machine restarted since: its last unsynced writes may be lost, so "
                             "its ids start a new incarnation (%s) and clients start over from "
                             "their cursors",
                             pl->cfg.db_path, chat_store_incarnation(pl->store));
    }
    for (; registered < CALLBACK_COUNT; registered++) {
        const struct registration *r = &callbacks[registered];
        rc = mosquitto_callback_register(identifier, r->event, r->cb, r->data, pl);
        if (r->event == CHAT_EVT_CLIENT_OFFLINE) {
            g_reload_go_on = rc == MOSQ_ERR_SUCCESS ? MOSQ_ERR_SUCCESS : MOSQ_ERR_PLUGIN_DEFER;
        }
        if (rc == MOSQ_ERR_NOT_SUPPORTED && r->optional) {
            continue;
        }
        if (rc != MOSQ_ERR_SUCCESS) {
            mosquitto_log_printf(MOSQ_LOG_ERR,
                                 "mosquitto-chat: cannot register callback for event %d: error %d",
                                 r->event, rc);
            goto fail;
        }
    }
    chat_config_log(&pl->cfg, chat_health_where(pl), chat_access_broker_asked(pl));
    *userdata = pl;
    return MOSQ_ERR_SUCCESS;

fail:
    /* Never leave half the callbacks registered after a failed init. */
    unregister(pl, registered);
    plugin_free(pl);
    return rc;
}

CHAT_EXPORT int mosquitto_plugin_cleanup(void *userdata, struct mosquitto_opt *options,
                                         int option_count)
{
    struct chat_plugin *pl = userdata;
    (void)options;
    (void)option_count;
    if (!pl) {
        return MOSQ_ERR_SUCCESS;
    }
    unregister(pl, CALLBACK_COUNT);
    plugin_free(pl);
    return MOSQ_ERR_SUCCESS;
}
