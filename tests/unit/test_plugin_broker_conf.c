/* Unit tests of plugin/broker_conf.c (the broker's configuration: its
 * listeners, the checkers each one's clients meet and in which order, and
 * whether each verifies usernames) and plugin/aclfile.c (the acl_file by
 * the broker's rules); test_plugin_access.c runs them. */
#define _XOPEN_SOURCE 700 /* mkdtemp, realpath */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aclfile.h"
#include "broker_conf.h"
#include "plugin.h"
#include "plugin_fixture.h"
#include "test_plugin_access.h"

/* A temporary directory with a stand-in for our own .so ("chat.so"). */
struct tmp {
    char dir[64];
    char self[PATH_MAX];
};

int conf_tmp_setup(void **state)
{
    struct tmp *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    snprintf(t->dir, sizeof(t->dir), "/tmp/chat_broker_conf.XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    char path[128];
    snprintf(path, sizeof(path), "%s/chat.so", t->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    assert_non_null(realpath(path, t->self));
    *state = t;
    return 0;
}

int conf_tmp_teardown(void **state)
{
    struct tmp *t = *state;
    plugin_rm_tree(t->dir);
    free(t);
    return 0;
}

/* Writes text to dir/name, with "SELF" replaced by self; returns the path
 * (static, overwritten by the next call). */
static const char *write_conf(const struct tmp *t, const char *dir, const char *name,
                              const char *text)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (const char *p = text; *p;) {
        if (!strncmp(p, "SELF", 4)) {
            fputs(t->self, f);
            p += 4;
        } else {
            fputc(*p++, f);
        }
    }
    fclose(f);
    return path;
}

static struct chat_broker_conf *read_conf(const struct tmp *t, const char *text)
{
    static struct chat_broker_conf bc;
    const char *path = write_conf(t, t->dir, "mosquitto.conf", text);
    assert_true(chat_broker_conf_read(path, t->self, false, &bc));
    return &bc;
}

/* The kinds of l's chain as letters: C chat, D dynsec, A acl_file, P other. */
static const char *chain(const struct chat_bc_listener *l)
{
    static char out[CHAT_BC_CHAIN + 2];
    static const char letters[] = "CDAP";
    size_t i = 0;
    for (; i < l->n_chain; i++) {
        out[i] = letters[l->chain[i].kind];
    }
    out[i] = l->chain_cut ? '+' : '\0';
    out[i + (l->chain_cut ? 1 : 0)] = '\0';
    return out;
}

void test_conf_listeners(void **state)
{
    struct tmp *t = *state;
    static const struct {
        const char *text;
        const char *chains;   /* each listener's chain, "|"-separated, in the broker's order */
        const char *ports;    /* their ports, "|"-separated */
        const char *verified; /* "1"/"0" each */
        const char *refusal;  /* a part of the refusal, or NULL */
    } cases[] = {
        {"listener 1883\nplugin SELF\n", "C", "1883", "0", NULL},
        {"plugin SELF\nacl_file /etc/acl\nlistener 1883\n", "CA", "1883", "0", NULL},
        {"plugin SELF\npassword_file /p\nlistener 1883\n", "C", "1883", "1", NULL},
        /* A psk_file checks PSK identities, not usernames. */
        {"plugin SELF\npsk_file /p\nlistener 1883\n", "C", "1883", "0", NULL},
        {"plugin SELF\npsk_file /p\nlistener 8883\npsk_hint h\nuse_identity_as_username true\n",
         "C", "8883", "1", NULL},
        /* dynamic-security after us: it defers to nothing we know, and
         * authenticates. */
        {"plugin SELF\nplugin /usr/lib/mosquitto_dynamic_security.so\nlistener 1883\n", "CD",
         "1883", "1", NULL},
        /* ... before us: refused, naming it. */
        {"plugin /usr/lib/mosquitto_dynamic_security.so\nplugin SELF\nlistener 1883\n", "DC",
         "1883", "1", "\"/usr/lib/mosquitto_dynamic_security.so\" answers the access checks"},
        /* A plugin not known to check usernames may not: not verified. */
        {"auth_plugin /opt/go-auth.so\nplugin SELF\n", "PC", "1883", "0", "before mosquitto-chat"},
        {"plugin SELF\nplugin /usr/lib/mosquitto_password_file.so\n", "CP", "1883", "1", NULL},
        /* No listener line: the broker's default listener on 1883. */
        {"plugin SELF\n", "C", "1883", "0", NULL},
        /* `port` makes the default listener, put last. */
        {"port 1885\nplugin SELF\nlistener 1886\n", "C|C", "1886|1885", "0|0", NULL},
        /* TLS identities verify usernames on their listener only, and only
         * where it requires client certificates. */
        {"plugin SELF\nlistener 1883\nlistener 8883\ncafile /ca\nrequire_certificate "
         "true\nuse_identity_as_username true\n",
         "C|C", "1883|8883", "0|1", NULL},
        {"plugin SELF\nlistener 8883\nuse_identity_as_username true\n", "C", "8883", "0", NULL},
        {"plugin SELF\nlistener 8883\nuse_subject_as_username truex\n", "C", "8883", "0", NULL},
        /* Listener options before the first listener, or `port` and
         * `bind_address` anywhere, make the default listener too. */
        {"max_connections 1000\nplugin SELF\nlistener 8883\n", "C|C", "8883|1883", "0|0", NULL},
        {"plugin SELF\nlistener 8883\nport 1884\n", "C|C", "8883|1884", "0|0", NULL},
        {"per_listener_settings true\nsocket_domain ipv4\nlistener 8883\nplugin SELF\n", "C|",
         "8883|1883", "0|0", "the default listener, port 1883 does not load mosquitto-chat"},
        /* per_listener_settings: each listener its own list. */
        {"per_listener_settings true\nlistener 1883\nplugin SELF\nlistener 1884\nplugin "
         "SELF\npassword_file /p\n",
         "C|C", "1883|1884", "0|1", NULL},
        {"per_listener_settings true\nlistener 1883\nplugin SELF\nlistener 1884\n", "C|",
         "1883|1884", "0|0", "listener 1884 does not load mosquitto-chat"},
        {"per_listener_settings true\nlistener 1883\nacl_file /a\nplugin SELF\n", "CA", "1883", "0",
         NULL},
        /* Lines before the first listener make the default listener too. */
        {"per_listener_settings true\nplugin SELF\nlistener 1884\nplugin SELF\n", "C|C",
         "1884|1883", "0|0", NULL},
        /* 2.1: global_plugin first, then each listener's plugin_use. */
        {"global_plugin SELF\nplugin_load acl /usr/lib/mosquitto_acl_file.so\nlistener "
         "1883\nplugin_use acl\n",
         "CP", "1883", "0", NULL},
        {"plugin_load chat SELF\nacl_file /a\nlistener 1883\nplugin_use chat\n", "AC", "1883", "0",
         "acl_file \"/a\" answers the access checks of listener 1883"},
        /* 2.1 registers plugins in plugin_load order, not plugin_use order. */
        {"plugin_load ds /usr/lib/mosquitto_dynamic_security.so\nplugin_load chat "
         "SELF\nlistener 1883\nplugin_use chat\nplugin_use ds\n",
         "DC", "1883", "1", "answers the access checks"},
        {"plugin_load chat SELF\nplugin_load ds /usr/lib/mosquitto_dynamic_security.so\nlistener "
         "1883\nplugin_use ds\nplugin_use chat\n",
         "CD", "1883", "1", NULL},
        /* Loaded twice for one listener: refused. */
        {"plugin SELF\nplugin SELF\nlistener 1883\n", "CC", "1883", "0", "more than once"},
        {"global_plugin SELF\nlistener 1883\nplugin_load c SELF\nplugin_use c\n", "CC", "1883", "0",
         "more than once"},
        /* A plugin_load that no listener uses is never loaded. */
        {"plugin SELF\nplugin_load other /o.so\nlistener 1883\n", "C", "1883", "0", NULL},
        {"global_plugin /o.so\nlistener 1883\nplugin_load chat SELF\nplugin_use chat\n", "PC",
         "1883", "0", "the plugin \"/o.so\""},
        /* Comments and blank lines, spaces and tabs. */
        {"# plugin /o.so\n\n  \tplugin   SELF  \r\n listener 1883\n", "C", "1883", "0", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct chat_broker_conf *bc = read_conf(t, cases[i].text);
        char chains[256] = "", ports[256] = "", verified[64] = "", buf[1024];
        for (size_t k = 0; k < bc->n_listeners; k++) {
            const struct chat_bc_listener *l = &bc->listeners[k];
            snprintf(chains + strlen(chains), sizeof(chains) - strlen(chains), "%s%s", k ? "|" : "",
                     chain(l));
            snprintf(ports + strlen(ports), sizeof(ports) - strlen(ports), "%s%d", k ? "|" : "",
                     l->port);
            snprintf(verified + strlen(verified), sizeof(verified) - strlen(verified), "%s%d",
                     k ? "|" : "", l->verified);
        }
        const char *refusal = chat_broker_conf_refusal(bc, buf, sizeof(buf));
        bool refused_ok =
            cases[i].refusal ? refusal && strstr(refusal, cases[i].refusal) : !refusal;
        if (strcmp(chains, cases[i].chains) || strcmp(ports, cases[i].ports) ||
            strcmp(verified, cases[i].verified) || !refused_ok) {
            fail_msg("case %zu (%s): chains %s ports %s verified %s refusal %s", i, cases[i].text,
                     chains, ports, verified, refusal ? refusal : "(none)");
        }
    }
}

void test_conf_include_dir(void **state)
{
    struct tmp *t = *state;
    char sub[128], text[256];
    snprintf(sub, sizeof(sub), "%s/conf.d", t->dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(text, sizeof(text), "include_dir %s\nlistener 1883\n", sub);

    /* The broker reads the files in name order (case first ignored):
     * "dynsec.conf" before "mosquitto-chat.conf" puts dynamic-security first. */
    write_conf(t, sub, "dynsec.conf", "plugin /usr/lib/mosquitto_dynamic_security.so\n");
    write_conf(t, sub, "mosquitto-chat.conf", "plugin SELF\n");
    write_conf(t, sub, "notes.txt", "plugin /x.so\n"); /* not *.conf: skipped */
    write_conf(t, sub, ".conf", "plugin /y.so\n");     /* nor a bare ".conf" */
    struct chat_broker_conf *bc = read_conf(t, text);
    char buf[1024];
    assert_string_equal(chain(&bc->listeners[0]), "DC");
    assert_non_null(chat_broker_conf_refusal(bc, buf, sizeof(buf)));
    assert_non_null(strstr(buf, "00-mosquitto-chat.conf"));

    /* The Debian package's name sorts first. */
    char old[256], fresh[256];
    snprintf(old, sizeof(old), "%s/mosquitto-chat.conf", sub);
    snprintf(fresh, sizeof(fresh), "%s/00-mosquitto-chat.conf", sub);
    assert_int_equal(rename(old, fresh), 0);
    bc = read_conf(t, text);
    assert_string_equal(chain(&bc->listeners[0]), "CD");
    assert_null(chat_broker_conf_refusal(bc, buf, sizeof(buf)));

    /* Case does not order first: "B.conf" comes after "a.conf". */
    assert_int_equal(unlink(fresh), 0);
    snprintf(old, sizeof(old), "%s/dynsec.conf", sub);
    assert_int_equal(unlink(old), 0);
    write_conf(t, sub, "B.conf", "plugin /b.so\n");
    write_conf(t, sub, "a.conf", "plugin SELF\n");
    bc = read_conf(t, text);
    assert_string_equal(chain(&bc->listeners[0]), "CP");

    /* An include_dir in an included file: 2.0 ignores it (2.1 refuses to
     * start), so its plugin lines count for nothing. */
    char nested[128], nested_text[256];
    snprintf(nested, sizeof(nested), "%s/nested.d", t->dir);
    assert_int_equal(mkdir(nested, 0700), 0);
    write_conf(t, nested, "chat.conf", "plugin /elsewhere/x.so\n");
    snprintf(nested_text, sizeof(nested_text), "include_dir %s\n", nested);
    write_conf(t, sub, "self.conf", nested_text);
    bc = read_conf(t, text);
    assert_true(bc->readable);
    assert_string_equal(chain(&bc->listeners[0]), "CP");
}

void test_conf_unreadable(void **state)
{
    struct tmp *t = *state;
    struct chat_broker_conf *bc = calloc(1, sizeof(*bc));
    char missing[128], text[256];
    assert_non_null(bc);

    snprintf(missing, sizeof(missing), "%s/missing.conf", t->dir);
    assert_false(chat_broker_conf_read(missing, t->self, false, bc));
    assert_false(bc->readable);
    assert_int_equal(bc->err, ENOENT);
    assert_string_equal(bc->unreadable, missing);

    /* A directory opens but cannot be read as a file. */
    assert_false(chat_broker_conf_read(t->dir, t->self, false, bc));
    assert_int_equal(bc->err, EISDIR);

    /* The first unreadable path counts; what follows is still read. */
    snprintf(text, sizeof(text), "include_dir %s/nodir\nplugin SELF\nacl_file /x\n", t->dir);
    const char *path = write_conf(t, t->dir, "mosquitto.conf", text);
    assert_false(chat_broker_conf_read(path, t->self, false, bc));
    assert_non_null(strstr(bc->unreadable, "/nodir"));
    assert_string_equal(chain(&bc->listeners[0]), "CA");
    free(bc);
}

/* Too many listeners to tell apart: refused, not guessed. */
void test_conf_too_many(void **state)
{
    struct tmp *t = *state;
    char text[4096] = "plugin SELF\n";
    for (int i = 0; i < CHAT_BC_LISTENERS + 1; i++) {
        snprintf(text + strlen(text), sizeof(text) - strlen(text), "listener %d\n", 2000 + i);
    }
    struct chat_broker_conf *bc = read_conf(t, text);
    char buf[1024];
    assert_true(bc->too_many);
    assert_non_null(chat_broker_conf_refusal(bc, buf, sizeof(buf)));
}

/* ===========================================================================
 * acl_file
 * ========================================================================= */

static chat_aclfile *load(const struct tmp *t, const char *text, char *why, size_t len)
{
    const char *path = write_conf(t, t->dir, "acl", text);
    return chat_aclfile_load(path, why, len);
}

void test_aclfile_rules(void **state)
{
    struct tmp *t = *state;
    static const struct {
        const char *text;
        const char *user; /* NULL: anonymous */
        const char *id;
        const char *topic;
        int access;
        bool allowed;
    } cases[] = {
        /* Lines before any `user` are the anonymous clients'. */
        {"topic read chat/#\n", NULL, "dev", "chat/room1", MOSQ_ACL_READ, true},
        {"topic read chat/#\n", "alice", "dev", "chat/room1", MOSQ_ACL_READ, false},
        {"topic read chat/#\n", NULL, "dev", "chat/room1", MOSQ_ACL_WRITE, false},
        {"user alice\ntopic readwrite chat/room1\n", "alice", "d", "chat/room1", MOSQ_ACL_READ,
         true},
        {"user alice\ntopic readwrite chat/room1\n", "alice", "d", "chat/room2", MOSQ_ACL_READ,
         false},
        {"user alice\ntopic readwrite chat/room1\n", "bob", "d", "chat/room1", MOSQ_ACL_READ,
         false},
        /* No access word: read and write. */
        {"user alice\ntopic chat/+\n", "alice", "d", "chat/room1", MOSQ_ACL_READ, true},
        /* A trailing access word alone is the topic (the broker's reading). */
        {"user alice\ntopic read   \n", "alice", "d", "read", MOSQ_ACL_WRITE, true},
        /* Write-only: a member that can send but never read. */
        {"user alice\ntopic write chat/#\n", "alice", "d", "chat/room1", MOSQ_ACL_READ, false},
        /* "deny" lines first, wherever they stand. */
        {"user bob\ntopic read chat/#\ntopic deny chat/secret\n", "bob", "d", "chat/secret",
         MOSQ_ACL_READ, false},
        {"user bob\ntopic read chat/#\ntopic deny chat/secret\n", "bob", "d", "chat/open",
         MOSQ_ACL_READ, true},
        /* A section named twice is one. */
        {"user bob\ntopic read a\nuser carl\ntopic read b\nuser bob\ntopic read chat/x\n", "bob",
         "d", "chat/x", MOSQ_ACL_READ, true},
        /* Patterns apply to everybody, with %u and %c. */
        {"pattern read chat/%u\n", "alice", "d", "chat/alice", MOSQ_ACL_READ, true},
        {"pattern read chat/%u\n", "alice", "d", "chat/bob", MOSQ_ACL_READ, false},
        {"pattern read chat/%u\n", NULL, "d", "chat/%u", MOSQ_ACL_READ, false},
        {"pattern read chat/%c\n", NULL, "dev9", "chat/dev9", MOSQ_ACL_READ, true},
        {"pattern readwrite chat/#\n", "alice", "d", "chat/room1", MOSQ_ACL_READ, true},
        /* A wildcard in a client id or username would widen a pattern. */
        {"pattern readwrite chat/#\n", "al+ce", "d", "chat/room1", MOSQ_ACL_READ, false},
        {"pattern readwrite chat/#\n", "alice", "d#", "chat/room1", MOSQ_ACL_READ, false},
        /* ... but only where patterns exist. */
        {"user a+\ntopic read chat/#\n", "a+", "d", "chat/room1", MOSQ_ACL_READ, true},
        /* A user's own lines before the patterns, deny patterns first. */
        {"user alice\ntopic read chat/#\npattern deny chat/#\n", "alice", "d", "chat/room1",
         MOSQ_ACL_READ, true},
        {"pattern read chat/#\npattern deny chat/%u\n", "alice", "d", "chat/alice", MOSQ_ACL_READ,
         false},
        /* `#` does not reach `$` topics. */
        {"topic read #\n", NULL, "d", "$SYS/x", MOSQ_ACL_READ, false},
        /* Nothing at all: denied. */
        {"# only a comment\n", NULL, "d", "chat/x", MOSQ_ACL_READ, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char why[256] = "";
        chat_aclfile *a = load(t, cases[i].text, why, sizeof(why));
        if (!a) {
            fail_msg("case %zu: refused: %s", i, why);
        }
        bool got =
            chat_aclfile_allows(a, cases[i].user, cases[i].id, cases[i].topic, cases[i].access);
        chat_aclfile_free(a);
        if (got != cases[i].allowed) {
            fail_msg("case %zu (%s): %s %s -> %d", i, cases[i].text,
                     cases[i].user ? cases[i].user : "-", cases[i].topic, got);
        }
    }
}

void test_aclfile_refused(void **state)
{
    struct tmp *t = *state;
    static const struct {
        const char *text;
        const char *why;
    } cases[] = {
        {"topic maybe chat/x\n", "line 1: invalid topic access type"},
        {"topic read chat/x\nbogus line\n", "line 2: invalid line"},
        {"  # indented comment\n", "line 1: invalid line"},
        {"topic\n", "line 1: empty topic"},
        {"user\n", "line 1: missing username"},
        {"topic read chat/#/x\n", "line 1: invalid ACL topic"},
        {"topic\tread\tchat/x\n", "line 1: invalid line"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char why[256] = "";
        chat_aclfile *a = load(t, cases[i].text, why, sizeof(why));
        if (a || !strstr(why, cases[i].why)) {
            chat_aclfile_free(a);
            fail_msg("case %zu (%s): %s", i, cases[i].text, a ? "accepted" : why);
        }
    }
    char why[256] = "";
    char missing[128];
    snprintf(missing, sizeof(missing), "%s/none", t->dir);
    assert_null(chat_aclfile_load(missing, why, sizeof(why)));
    assert_non_null(strstr(why, "No such file"));
    assert_false(chat_aclfile_allows(NULL, "a", "b", "chat/x", MOSQ_ACL_READ));
}
