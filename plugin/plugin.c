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
    struct chat_plugin *pl = userdata;
    (void)event;
    (void)event_data;
    if (pl->cfg.fsync == CHAT_SYNC_BATCH) {
        chat_err rc = chat_store_sync_async(pl->store);
        if (rc != CHAT_OK) {
            mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: store sync failed: %s",
                                 chat_strerror(rc));
        }
    }
    time_t now = time(NULL);
    chat_replay_tick(pl, now);
    chat_retention_tick(pl, now);
    return MOSQ_ERR_SUCCESS;
}

static int on_disconnect(int event, void *event_data, void *userdata)
{
    struct mosquitto_evt_disconnect *ev = event_data;
    const char *id = mosquitto_client_id(ev->client);
    (void)event;
    if (id) {
        chat_replay_stop(userdata, id, NULL);
        chat_pending_drop(userdata, id);
    }
    return MOSQ_ERR_SUCCESS;
}

struct registration {
    int event;
    MOSQ_FUNC_generic_callback cb;
    const void *data;
};

static const struct registration callbacks[] = {
    {MOSQ_EVT_ACL_CHECK, on_acl, NULL},
    {MOSQ_EVT_MESSAGE, on_message, NULL},
    {MOSQ_EVT_CONTROL, on_control, CHAT_CONTROL_TOPIC},
    {MOSQ_EVT_TICK, on_tick, NULL},
    {MOSQ_EVT_DISCONNECT, on_disconnect, NULL},
};
#define CALLBACK_COUNT (sizeof(callbacks) / sizeof(callbacks[0]))

static void unregister(struct chat_plugin *pl, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        mosquitto_callback_unregister(pl->pid, callbacks[i].event, callbacks[i].cb,
                                      callbacks[i].data);
    }
}

static void plugin_free(struct chat_plugin *pl)
{
    if (!pl) {
        return;
    }
    chat_replay_free_all(pl);
    chat_pending_drop(pl, NULL);
    free(pl->last_env);
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
    chat_err err = chat_store_open(pl->cfg.db_path, pl->cfg.fsync, &pl->store, &errmsg);
    if (err != CHAT_OK) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: cannot open store \"%s\": %s",
                             pl->cfg.db_path, errmsg ? errmsg : chat_strerror(err));
        free(errmsg);
        rc = MOSQ_ERR_UNKNOWN;
        goto fail;
    }
    for (; registered < CALLBACK_COUNT; registered++) {
        const struct registration *r = &callbacks[registered];
        rc = mosquitto_callback_register(identifier, r->event, r->cb, r->data, pl);
        if (rc != MOSQ_ERR_SUCCESS) {
            mosquitto_log_printf(MOSQ_LOG_ERR,
                                 "mosquitto-chat: cannot register callback for event %d: error %d",
                                 r->event, rc);
            goto fail;
        }
    }
    mosquitto_log_printf(
        MOSQ_LOG_INFO, "mosquitto-chat: store \"%s\", topics \"%s/<group>\", access checks: %s",
        pl->cfg.db_path, pl->cfg.topic_prefix,
        pl->cfg.acl_mode == CHAT_ACL_ALLOW ? "allow outside chat" : "defer to the broker's");
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
