/* broker_conf.c: the broker's configuration, read for where mosquitto-chat
 * sits among its listeners and access checkers (see broker_conf.h). */
#define _GNU_SOURCE /* dladdr */
#include "broker_conf.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOADS_MAX 32 /* plugin_load names kept (2.1) */

/* The security options of one scope as the file sets them. */
struct scope {
    struct chat_bc_checker plugins[CHAT_BC_CHAIN];
    unsigned seq[CHAT_BC_CHAIN]; /* each plugin's place in the broker's load order */
    size_t n_plugins;
    bool cut;
    char acl_file[CHAT_BC_PATH]; /* "" when none */
    bool acl_truncated;
    bool auth;         /* password_file or psk_file */
    bool tls_identity; /* use_identity_as_username / use_subject_as_username */
    bool require_cert; /* require_certificate true */
    bool tls_files;    /* certfile, cafile or capath */
    bool psk_hint;     /* a PSK listener: the identity is the psk_file's */
    bool set;          /* some option made the default listener exist */
};

struct parse {
    struct chat_broker_conf *bc;
    const char *self;
    struct scope global;                 /* per_listener_settings false, global_plugin */
    struct scope dflt;                   /* the default listener's own lines */
    struct scope own[CHAT_BC_LISTENERS]; /* each explicit listener's own lines */
    int port[CHAT_BC_LISTENERS];
    size_t n;          /* explicit listeners */
    struct scope *cur; /* the listener the lines set: one of own[], or dflt */
    bool v21;          /* 2.1's syntax and rules (broker.c knows the version) */
    int default_port;  /* `port`, 0 when not set */
    unsigned seq;      /* plugin, auth_plugin, global_plugin and plugin_load lines so far */
    struct {
        char name[64];
        char path[CHAT_BC_PATH];
        unsigned seq;
    } loads[LOADS_MAX];
    size_t n_loads;
};

static void unreadable(struct chat_broker_conf *bc, const char *path, int err)
{
    if (bc->readable) {
        bc->readable = false;
        bc->err = err;
        snprintf(bc->unreadable, sizeof(bc->unreadable), "%s", path);
    }
}

static bool is_true(const char *arg)
{
    return !strncmp(arg, "true", 4) && (arg[4] == '\0' || isspace((unsigned char)arg[4]));
}

/* The scope whose own lines this is: the current listener's, or the default
 * listener's before the first `listener` line (and, on 2.1, after `port`). */
static struct scope *listener_scope(struct parse *p)
{
    return p->cur;
}

/* Where a security option (password_file, acl_file, plugin ...) goes. */
static struct scope *security_scope(struct parse *p)
{
    return p->bc->per_listener ? listener_scope(p) : &p->global;
}

static enum chat_bc_kind plugin_kind(const char *path, const char *self)
{
    char real[PATH_MAX];
    if (self[0] && realpath(path, real) && !strcmp(real, self)) {
        return CHAT_BC_CHAT;
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strstr(base, "dynamic_security") || strstr(base, "dynamic-security") ? CHAT_BC_DYNSEC
                                                                                : CHAT_BC_PLUGIN;
}

static void add_plugin(struct parse *p, struct scope *s, const char *path, unsigned seq)
{
    enum chat_bc_kind kind = plugin_kind(path, p->self);
    p->bc->chat_lines += kind == CHAT_BC_CHAT;
    if (s->n_plugins == CHAT_BC_CHAIN) {
        s->cut = true;
        return;
    }
    s->seq[s->n_plugins] = seq;
    struct chat_bc_checker *c = &s->plugins[s->n_plugins++];
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    c->kind = kind;
    c->authenticates =
        kind == CHAT_BC_DYNSEC || strstr(base, "password_file") || strstr(base, "password-file");
    c->truncated = strlen(path) >= sizeof(c->path);
    snprintf(c->path, sizeof(c->path), "%s", path);
    s->set = true;
}

static void scan_file(struct parse *p, const char *path, int depth);

/* include_dir: the *.conf files of dir in the broker's order (case
 * insensitive first, then by case). */
static int name_cmp(const void *a, const void *b)
{
    const char *s1 = *(const char *const *)a, *s2 = *(const char *const *)b;
    for (; *s1 && *s2; s1++, s2++) {
        int d = toupper((unsigned char)*s1) - toupper((unsigned char)*s2);
        if (d) {
            return d;
        }
        if (*s1 != *s2) {
            return (unsigned char)*s1 - (unsigned char)*s2;
        }
    }
    return (unsigned char)*s1 - (unsigned char)*s2;
}

static void scan_dir(struct parse *p, const char *dir, int depth)
{
    DIR *d = opendir(dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;

    if (!d) {
        unreadable(p->bc, dir, errno);
        return;
    }
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= 5 || strcmp(e->d_name + len - 5, ".conf") != 0) {
            continue;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char **nn = realloc(names, ncap * sizeof(*nn));
            if (!nn) {
                unreadable(p->bc, dir, ENOMEM);
                break;
            }
            names = nn;
            cap = ncap;
        }
        if (!(names[n] = strdup(e->d_name))) {
            unreadable(p->bc, dir, ENOMEM);
            break;
        }
        n++;
    }
    closedir(d);
    if (n) {
        qsort(names, n, sizeof(*names), name_cmp);
    }
    for (size_t i = 0; i < n; i++) {
        char sub[PATH_MAX + 256];
        snprintf(sub, sizeof(sub), "%s/%s", dir, names[i]);
        scan_file(p, sub, depth + 1);
        free(names[i]);
    }
    free(names);
}

/* Options that configure a listener: before the first `listener` line
 * (or, on 2.1, after `port`) they make the broker open its default
 * listener (2.0's config__read checks the default listener's fields; 2.1
 * calls config__create_default_listener). A word missing here that does is
 * a listener the scan would miss: the list errs towards more. */
static const char *const listener_words[] = {"accept_protocol_versions",
                                             "allow_zero_length_clientid",
                                             "bind_interface",
                                             "cafile",
                                             "capath",
                                             "certfile",
                                             "ciphers",
                                             "ciphers_tls13",
                                             "crlfile",
                                             "dhparamfile",
                                             "enable_proxy_protocol",
                                             "http_dir",
                                             "keyfile",
                                             "listener_allow_anonymous",
                                             "max_connections",
                                             "max_qos",
                                             "max_topic_alias",
                                             "mount_point",
                                             "protocol",
                                             "psk_hint",
                                             "require_certificate",
                                             "socket_domain",
                                             "tls_engine",
                                             "tls_engine_kpass_sha1",
                                             "tls_keyform",
                                             "tls_version",
                                             "use_identity_as_username",
                                             "use_subject_as_username",
                                             "use_username_as_clientid",
                                             "websockets_headers_size",
                                             NULL};

static bool is_listener_word(const char *word)
{
    for (const char *const *w = listener_words; *w; w++) {
        if (!strcmp(*w, word)) {
            return true;
        }
    }
    return false;
}

/* The port a `listener` or `port` line names, read as the broker reads it
 * (atoi: its leading digits, whatever follows); 0 when out of range, which
 * the broker refuses, so that no client comes through such a listener. */
static int port_of(const char *arg)
{
    long v = strtol(arg, NULL, 10);
    return v < 0 || v > 65535 ? 0 : (int)v;
}

static void scan_line(struct parse *p, const char *word, const char *arg, int depth)
{
    struct chat_broker_conf *bc = p->bc;

    if (!strcmp(word, "per_listener_settings")) {
        bc->per_listener = is_true(arg);
    } else if (!strcmp(word, "listener")) {
        if (p->n == CHAT_BC_LISTENERS) {
            bc->too_many = true;
            return;
        }
        p->port[p->n] = port_of(arg);
        memset(&p->own[p->n], 0, sizeof(p->own[p->n]));
        p->cur = &p->own[p->n];
        p->n++;
    } else if (!strcmp(word, "port") || !strcmp(word, "bind_address")) {
        /* Anywhere in the file, they make the default listener; on 2.1 the
         * lines after them set it, as after a `listener` line. */
        if (!strcmp(word, "port")) {
            p->default_port = port_of(arg);
        }
        p->dflt.set = true;
        if (p->v21) {
            p->cur = &p->dflt;
        }
    } else if (is_listener_word(word)) {
        struct scope *s = listener_scope(p);
        s->set = true;
        if ((!strcmp(word, "use_identity_as_username") ||
             !strcmp(word, "use_subject_as_username")) &&
            is_true(arg)) {
            s->tls_identity = true;
        } else if (!strcmp(word, "require_certificate")) {
            s->require_cert = is_true(arg);
        } else if (!strcmp(word, "certfile") || !strcmp(word, "cafile") ||
                   !strcmp(word, "capath")) {
            s->tls_files = true;
        } else if (!strcmp(word, "psk_hint")) {
            s->psk_hint = true;
        }
    } else if (!strcmp(word, "acl_file") && arg[0]) {
        struct scope *s = security_scope(p);
        s->acl_truncated = strlen(arg) >= sizeof(s->acl_file);
        snprintf(s->acl_file, sizeof(s->acl_file), "%s", arg);
        s->set = true;
    } else if (!strcmp(word, "password_file")) {
        struct scope *s = security_scope(p);
        s->auth = true;
        s->set = true;
    } else if (!strcmp(word, "psk_file")) {
        /* A psk_file checks PSK identities, not the usernames of CONNECT
         * (security_default.c registers no username check for it): only a
         * PSK listener's use_identity_as_username makes the identity one. */
        security_scope(p)->set = true;
    } else if (!strcmp(word, "plugin") || !strcmp(word, "auth_plugin")) {
        add_plugin(p, security_scope(p), arg, ++p->seq);
    } else if (!strcmp(word, "global_plugin")) {
        add_plugin(p, &p->global, arg, ++p->seq);
    } else if (!strcmp(word, "plugin_load")) {
        /* 2.1: "plugin_load <name> <path>", loaded (and its callbacks
         * registered) in the order of these lines, only where used. */
        char name[64], path[CHAT_BC_PATH];
        unsigned seq = ++p->seq;
        if (p->n_loads < LOADS_MAX && sscanf(arg, "%63s %511[^\r\n]", name, path) == 2) {
            snprintf(p->loads[p->n_loads].name, sizeof(p->loads[0].name), "%s", name);
            snprintf(p->loads[p->n_loads].path, sizeof(p->loads[0].path), "%s", path);
            p->loads[p->n_loads].seq = seq;
            p->n_loads++;
        }
    } else if (!strcmp(word, "plugin_use") && p->n > 0) {
        for (size_t i = 0; i < p->n_loads; i++) {
            if (!strcmp(p->loads[i].name, arg)) {
                add_plugin(p, listener_scope(p), p->loads[i].path, p->loads[i].seq);
            }
        }
    } else if (!strcmp(word, "sys_interval")) {
        long secs = strtol(arg, NULL, 10);
        bc->sys_interval = secs > 0 ? (secs < INT_MAX ? (int)secs : INT_MAX) : 0;
    } else if (!strcmp(word, "include_dir") && arg[0] && depth == 0) {
        /* Only from the main file: 2.0 ignores an include_dir in an included
         * file, 2.1 refuses it (and the broker does not start). */
        scan_dir(p, arg, depth);
    }
}

static void scan_file(struct parse *p, const char *path, int depth)
{
    char *line = NULL;
    size_t cap = 0;
    FILE *f = fopen(path, "r");

    if (!f) {
        unreadable(p->bc, path, errno);
        return;
    }
    while (getline(&line, &cap, f) >= 0) {
        char *s = line;
        while (*s == ' ' || *s == '\t') {
            s++;
        }
        if (*s == '#' || *s == '\0') {
            continue;
        }
        char *word = s;
        while (*s && !isspace((unsigned char)*s)) {
            s++;
        }
        if (*s) {
            *s++ = '\0';
        }
        while (*s == ' ' || *s == '\t') {
            s++;
        }
        char *arg = s;
        size_t n = strlen(arg);
        while (n > 0 && isspace((unsigned char)arg[n - 1])) {
            arg[--n] = '\0';
        }
        scan_line(p, word, arg, depth);
    }
    if (ferror(f)) {
        unreadable(p->bc, path, errno ? errno : EIO);
    }
    free(line);
    (void)fclose(f); /* read only: nothing to lose */
}

/* Appends what scope s asks, in the broker's order: its plugins, then its
 * acl_file, registered after every plugin. */
static void chain_add(struct chat_bc_listener *l, const struct scope *s)
{
    /* In load order: the broker registers a plugin's callbacks when it
     * initialises it (2.1's plugin_use lines do not reorder them). */
    bool taken[CHAT_BC_CHAIN] = {false};
    for (size_t n = 0; n < s->n_plugins; n++) {
        size_t best = CHAT_BC_CHAIN;
        for (size_t i = 0; i < s->n_plugins; i++) {
            if (!taken[i] && (best == CHAT_BC_CHAIN || s->seq[i] < s->seq[best])) {
                best = i;
            }
        }
        if (best == CHAT_BC_CHAIN) {
            break; /* cannot happen: n_plugins entries, n taken so far */
        }
        taken[best] = true;
        if (l->n_chain == CHAT_BC_CHAIN) {
            l->chain_cut = true;
            return;
        }
        l->chain[l->n_chain++] = s->plugins[best];
    }
    l->chain_cut |= s->cut;
    if (s->acl_file[0]) {
        if (l->n_chain == CHAT_BC_CHAIN) {
            l->chain_cut = true;
            return;
        }
        struct chat_bc_checker *c = &l->chain[l->n_chain++];
        c->kind = CHAT_BC_ACL_FILE;
        c->truncated = s->acl_truncated;
        snprintf(c->path, sizeof(c->path), "%s", s->acl_file);
    }
}

static void finish_listener(struct chat_bc_listener *l, const struct scope *global,
                            const struct scope *own)
{
    chain_add(l, global);
    chain_add(l, own);
    l->chat_pos = -1;
    bool auth_plugin = false;
    for (size_t i = 0; i < l->n_chain; i++) {
        if (l->chain[i].kind == CHAT_BC_CHAT) {
            l->chats++;
            if (l->chat_pos < 0) {
                l->chat_pos = (int)i;
            }
        }
        auth_plugin = auth_plugin || l->chain[i].authenticates;
    }
    /* A TLS identity is a username only where the listener has one: a
     * client certificate it requires, or PSK. */
    bool identity = own->tls_identity && ((own->require_cert && own->tls_files) || own->psk_hint);
    l->verified = global->auth || own->auth || identity || auth_plugin;
}

bool chat_broker_conf_read(const char *conf, const char *self, bool v21,
                           struct chat_broker_conf *bc)
{
    struct parse *p = calloc(1, sizeof(*p));

    memset(bc, 0, sizeof(*bc));
    bc->readable = true;
    bc->sys_interval = 10; /* Mosquitto's default */
    if (!p) {
        unreadable(bc, conf, ENOMEM);
        return false;
    }
    p->bc = bc;
    p->self = self ? self : "";
    p->v21 = v21;
    p->cur = &p->dflt;
    scan_file(p, conf, 0);
    for (size_t i = 0; i < p->n; i++) {
        struct chat_bc_listener *l = &bc->listeners[bc->n_listeners++];
        l->port = p->port[i];
        finish_listener(l, &p->global, &p->own[i]);
    }
    /* The broker makes a listener of the lines before the first `listener`
     * when they set anything of one, or when there is no other, and puts
     * it last. */
    if ((p->dflt.set || p->n == 0) && bc->n_listeners < CHAT_BC_LISTENERS) {
        struct chat_bc_listener *l = &bc->listeners[bc->n_listeners++];
        l->port = p->default_port ? p->default_port : 1883;
        l->is_default = true;
        finish_listener(l, &p->global, &p->dflt);
    } else if (p->dflt.set || p->n == 0) {
        bc->too_many = true;
    }
    free(p);
    return bc->readable;
}

bool chat_broker_conf_scan(bool v21, struct chat_broker_conf *bc)
{
    char args[8192];
    char self[PATH_MAX] = "";

    FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f) {
        memset(bc, 0, sizeof(*bc));
        unreadable(bc, "/proc/self/cmdline", errno);
        return false;
    }
    size_t n = fread(args, 1, sizeof(args) - 1, f);
    (void)fclose(f); /* read only: nothing to lose */
    args[n] = '\0';
    const char *conf = NULL;
    for (size_t i = 0; i < n;) {
        const char *a = args + i;
        size_t len = strlen(a);
        if ((!strcmp(a, "-c") || !strcmp(a, "--config-file")) && i + len + 1 < n) {
            conf = a + len + 1;
        }
        i += len + 1;
    }
    if (!conf) {
        /* No configuration, so no plugin line either: a harness loaded us,
         * alone, on the broker's default listener. */
        memset(bc, 0, sizeof(*bc));
        bc->readable = true;
        bc->sys_interval = 10;
        bc->n_listeners = 1;
        bc->listeners[0].port = 1883;
        bc->listeners[0].is_default = true;
        bc->listeners[0].n_chain = 1;
        bc->listeners[0].chain[0].kind = CHAT_BC_CHAT;
        bc->chat_lines = 1;
        return true;
    }
    Dl_info info;
    static const char anchor; /* any object of ours tells dladdr who we are */
    if (dladdr(&anchor, &info) && info.dli_fname && !realpath(info.dli_fname, self)) {
        self[0] = '\0';
    }
    return chat_broker_conf_read(conf, self, v21, bc);
}

bool chat_bc_others(const struct chat_bc_listener *l)
{
    if (l->chain_cut) {
        return true;
    }
    for (size_t i = 0; i < l->n_chain; i++) {
        if (l->chain[i].kind != CHAT_BC_CHAT) {
            return true;
        }
    }
    return false;
}

const char *chat_broker_conf_refusal(const struct chat_broker_conf *bc, char *buf, size_t len)
{
    if (bc->too_many) {
        snprintf(buf, len,
                 "the broker's configuration has more than %d listeners: mosquitto-chat cannot "
                 "check that it is the first access checker of each",
                 CHAT_BC_LISTENERS);
        return buf;
    }
    for (size_t i = 0; i < bc->n_listeners; i++) {
        const struct chat_bc_listener *l = &bc->listeners[i];
        char where[96];
        snprintf(where, sizeof(where), "%s %d",
                 l->is_default ? "the default listener, port" : "listener", l->port);
        if (l->chat_pos < 0) {
            snprintf(buf, len,
                     "%s does not load mosquitto-chat (per_listener_settings true gives each "
                     "listener its own plugins), so its clients would use the chat topics "
                     "unchecked: add mosquitto-chat's plugin line under every listener, or on "
                     "Mosquitto 2.1 load it once with global_plugin",
                     where);
            return buf;
        }
        if (l->chats > 1) {
            snprintf(buf, len,
                     "mosquitto-chat is loaded more than once for %s (two plugin lines, a link "
                     "to it, or global_plugin and a listener's plugin line): every event would "
                     "be handled twice; load it once per listener",
                     where);
            return buf;
        }
        if (l->chat_pos > 0) {
            const struct chat_bc_checker *c = &l->chain[0];
            snprintf(buf, len,
                     "%s \"%s\" answers the access checks of %s before mosquitto-chat, and "
                     "Mosquitto stops at the first answer, so mosquitto-chat's checks would be "
                     "skipped: put mosquitto-chat's plugin line before every other plugin line "
                     "(the files of an include_dir load in name order: on Debian name its "
                     "snippet 00-mosquitto-chat.conf)%s",
                     c->kind == CHAT_BC_ACL_FILE ? "acl_file" : "the plugin", c->path, where,
                     c->kind == CHAT_BC_ACL_FILE
                         ? "; an acl_file of the global list is asked before a listener's "
                           "plugins: load mosquitto-chat with global_plugin"
                         : "");
            return buf;
        }
    }
    return NULL;
}
