/* integ_dropin_setup: the broker setups of integ_dropin (see
 * integ_dropin_setup.h). */
#include "integ_dropin_setup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const dropin_users[DROPIN_USERS] = {"u1", "u2", "u3"};

const char *dropin_password(const char *user)
{
    static char buf[64];

    snprintf(buf, sizeof buf, "pw-%s-secret", user);
    return buf;
}

static void write_passwd(const char *dir)
{
    char path[512];

    snprintf(path, sizeof path, "%s/passwd", dir);
    for (int i = 0; i < DROPIN_USERS; i++) {
        char pw[64];
        snprintf(pw, sizeof pw, "%s", dropin_password(dropin_users[i]));
        if (i == 0) {
            const char *argv[] = {
                ts_broker_program("mosquitto_passwd"), "-b", "-c", path, dropin_users[i], pw, NULL};
            ts_run_ok(argv);
        } else {
            const char *argv[] = {
                ts_broker_program("mosquitto_passwd"), "-b", path, dropin_users[i], pw, NULL};
            ts_run_ok(argv);
        }
    }
}

/* The acl_file: some rights per user outside chat, and the chat lines
 * docs/protocol.md tells operators to add, for u1 and u2 only. */
static void write_acl(const char *dir)
{
    static const char acl[] = "# integ_dropin\n"
                              "user u1\n"
                              "topic readwrite a/#\n"
                              "topic write w/only\n"
                              "topic readwrite chat\n"
                              "topic readwrite chatty/#\n"
                              "topic readwrite news/#\n"
                              "topic readwrite chat/#\n"
                              "\n"
                              "user u2\n"
                              "topic read a/#\n"
                              "topic read w/only\n"
                              "topic read chat\n"
                              "topic write news/#\n"
                              "topic readwrite chat/#\n"
                              "\n"
                              "user u3\n"
                              "topic read b/#\n"
                              "topic write a/b\n"
                              "topic write c/d\n"
                              "topic read news/+\n"
                              "\n"
                              "pattern readwrite users/%u/#\n"
                              "pattern write $CONTROL/chat/v1\n";
    char path[512];

    snprintf(path, sizeof path, "%s/acl", dir);
    ts_write_file(path, acl, sizeof acl - 1);
}

static void add_acl(cJSON *acls, const char *type, const char *topic, bool allow)
{
    cJSON *a = cJSON_CreateObject();

    ASSERT(a != NULL);
    cJSON_AddStringToObject(a, "acltype", type);
    cJSON_AddStringToObject(a, "topic", topic);
    cJSON_AddBoolToObject(a, "allow", allow);
    cJSON_AddItemToArray(acls, a);
}

static cJSON *add_role(cJSON *roles, const char *name)
{
    cJSON *r = cJSON_CreateObject();
    cJSON *acls = cJSON_CreateArray();

    ASSERT(r != NULL && acls != NULL);
    cJSON_AddStringToObject(r, "rolename", name);
    cJSON_AddItemToObject(r, "acls", acls);
    cJSON_AddItemToArray(roles, r);
    return acls;
}

/* The dynamic-security configuration: admin as `mosquitto_ctrl dynsec init`
 * makes it; u1..u3 with their own password hashes (made the same way) and
 * roles; u1 and u2 also get the role "chatter" of docs/protocol.md. */
static void write_dynsec(const char *dir)
{
    char path[512], init[512];
    cJSON *root, *clients, *roles, *acls;
    char *text;

    snprintf(path, sizeof path, "%s/dynsec.json", dir);
    {
        char pw[64];
        snprintf(pw, sizeof pw, "%s", dropin_password("admin"));
        {
            const char *argv[] = {
                ts_broker_program("mosquitto_ctrl"), "dynsec", "init", path, "admin", pw, NULL};
            ts_run_ok(argv);
        }
    }
    text = ts_read_file(path, NULL);
    ASSERTF(text != NULL, "mosquitto_ctrl wrote no %s", path);
    root = cJSON_Parse(text);
    free(text);
    clients = cJSON_GetObjectItemCaseSensitive(root, "clients");
    roles = cJSON_GetObjectItemCaseSensitive(root, "roles");
    ASSERTF(cJSON_IsArray(clients) && cJSON_IsArray(roles), "unexpected dynsec init output");

    for (int i = 0; i < DROPIN_USERS; i++) {
        char pw[64], role[32];
        cJSON *made, *client, *rs;
        snprintf(init, sizeof init, "%s/init-%s.json", dir, dropin_users[i]);
        snprintf(pw, sizeof pw, "%s", dropin_password(dropin_users[i]));
        {
            const char *argv[] = {ts_broker_program("mosquitto_ctrl"),
                                  "dynsec",
                                  "init",
                                  init,
                                  dropin_users[i],
                                  pw,
                                  NULL};
            ts_run_ok(argv);
        }
        text = ts_read_file(init, NULL);
        ASSERTF(text != NULL, "mosquitto_ctrl wrote no %s", init);
        made = cJSON_Parse(text);
        free(text);
        client = cJSON_DetachItemFromArray(cJSON_GetObjectItemCaseSensitive(made, "clients"), 0);
        ASSERT(client != NULL);
        cJSON_DeleteItemFromObjectCaseSensitive(client, "roles");
        rs = cJSON_AddArrayToObject(client, "roles");
        snprintf(role, sizeof role, "role-%s", dropin_users[i]);
        cJSON_AddItemToArray(rs, cJSON_CreateObject());
        cJSON_AddStringToObject(cJSON_GetArrayItem(rs, 0), "rolename", role);
        if (i < 2) {
            cJSON_AddItemToArray(rs, cJSON_CreateObject());
            cJSON_AddStringToObject(cJSON_GetArrayItem(rs, 1), "rolename", "chatter");
        }
        cJSON_AddItemToArray(clients, client);
        cJSON_Delete(made);
    }
    acls = add_role(roles, "role-u1");
    add_acl(acls, "publishClientSend", "a/#", true);
    add_acl(acls, "subscribePattern", "a/#", true);
    add_acl(acls, "publishClientSend", "w/only", true);
    add_acl(acls, "publishClientSend", "chat", true);
    add_acl(acls, "subscribePattern", "chat", true);
    add_acl(acls, "publishClientSend", "chatty/#", true);
    add_acl(acls, "subscribePattern", "chatty/#", true);
    add_acl(acls, "publishClientSend", "news/#", true);
    add_acl(acls, "publishClientSend", "users/u1/#", true);
    add_acl(acls, "subscribePattern", "users/u1/#", true);
    acls = add_role(roles, "role-u2");
    add_acl(acls, "subscribePattern", "a/#", true);
    add_acl(acls, "subscribePattern", "w/only", true);
    add_acl(acls, "subscribePattern", "#", true);
    add_acl(acls, "publishClientReceive", "c/#", false);
    add_acl(acls, "publishClientSend", "news/#", true);
    add_acl(acls, "publishClientSend", "users/u2/#", true);
    acls = add_role(roles, "role-u3");
    add_acl(acls, "subscribePattern", "b/#", true);
    add_acl(acls, "subscribePattern", "news/+", true);
    add_acl(acls, "publishClientSend", "a/b", true);
    add_acl(acls, "publishClientSend", "c/d", true);
    add_acl(acls, "publishClientSend", "users/u3/#", true);
    add_acl(acls, "subscribePattern", "users/u3/#", true);
    add_acl(acls, "publishClientSend", "$CONTROL/chat/v1", true);
    /* docs/protocol.md's role for chatting clients. */
    acls = add_role(roles, "chatter");
    add_acl(acls, "publishClientSend", "chat/#", true);
    add_acl(acls, "publishClientReceive", "chat/#", true);
    add_acl(acls, "subscribePattern", "chat/#", true);
    add_acl(acls, "publishClientSend", "$CONTROL/chat/v1", true);

    text = cJSON_Print(root);
    ASSERT(text != NULL);
    ts_write_text(path, text);
    cJSON_free(text);
    cJSON_Delete(root);
}

/* The `plugin` line of the dynamic-security plugin (dropin_use_dynsec). */
static char g_dynsec_line[600];

void dropin_use_dynsec(const char *path)
{
    snprintf(g_dynsec_line, sizeof g_dynsec_line, "plugin %s", path);
}

ts_broker *dropin_start(enum setup setup, bool with_chat)
{
    static const char *const passwd_lines[] = {"password_file @DIR@/passwd", "acl_file @DIR@/acl",
                                               NULL};
    static const char *const dynsec_after[] = {g_dynsec_line,
                                               "plugin_opt_config_file @DIR@/dynsec.json", NULL};
    ts_broker_conf conf = {.without_chat = !with_chat};
    ts_broker *b;

    if (setup == PASSWD) {
        conf.lines = passwd_lines;
        conf.no_anonymous = true;
    } else if (setup == DYNSEC) {
        conf.after = dynsec_after;
        conf.no_anonymous = true;
    }
    b = ts_broker_create(&conf);
    if (setup == PASSWD) {
        write_passwd(ts_broker_dir(b));
        write_acl(ts_broker_dir(b));
    } else if (setup == DYNSEC) {
        write_dynsec(ts_broker_dir(b));
    }
    ts_broker_launch(b);
    return b;
}

ts_broker *dropin_create_dynsec(const char *const *plugin_opts, bool chat_first)
{
    static const char *const dynsec[] = {g_dynsec_line, "plugin_opt_config_file @DIR@/dynsec.json",
                                         NULL};
    ts_broker_conf conf = {.plugin_opts = plugin_opts, .no_anonymous = true};
    ts_broker *b;

    if (chat_first)
        conf.after = dynsec;
    else
        conf.lines = dynsec;
    b = ts_broker_create(&conf);
    write_dynsec(ts_broker_dir(b));
    return b;
}
