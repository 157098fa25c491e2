/* broker_conf: what the broker's own configuration says about where
 * mosquitto-chat sits, read the way the broker reads it (the file named by
 * -c on its command line, include_dir in name order; Mosquitto 2.0 and 2.1
 * syntax): its listeners, which access checkers the clients of each meet
 * and in which order, and whether each verifies usernames.
 *
 * Why: Mosquitto asks access checkers in load order and stops at the first
 * answer, never tells a plugin what the others decided, and (2.0) gives a
 * plugin no way to learn which listener a client came through or what else
 * is loaded. The plugin must be the first checker every client meets, must
 * defer to the checkers that follow it, and may trust a username only where
 * the broker checked it.
 *
 * How the lists are built (Mosquitto's src/conf.c, security.c, plugin_init.c):
 *   - per_listener_settings false: one list for every client: the plugin
 *     and global_plugin lines in file order, then acl_file (registered
 *     after every plugin); 2.1 adds, per listener, its plugin_use plugins.
 *   - per_listener_settings true: each listener has its own list: its plugin
 *     lines (those before the first listener belong to the default
 *     listener, which the broker appends last), then its acl_file; 2.1 runs
 *     the global_plugin lines first.
 *
 * Ownership: plain values (about 140 KiB: allocate it), no pointers.
 * Threading: the broker's thread, at init and reload.
 */
#ifndef CHAT_BROKER_CONF_H
#define CHAT_BROKER_CONF_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#define CHAT_BC_LISTENERS 32 /* listeners told apart; more refuse to start */
#define CHAT_BC_CHAIN 8      /* checkers kept per listener's list; more are unknown ones */
#define CHAT_BC_PATH 512     /* a plugin's or acl_file's path; longer ones are cut */

enum chat_bc_kind {
    CHAT_BC_CHAT = 0, /* mosquitto-chat itself */
    CHAT_BC_DYNSEC,   /* Mosquitto's dynamic-security plugin */
    CHAT_BC_ACL_FILE, /* the broker's acl_file */
    CHAT_BC_PLUGIN    /* any other plugin */
};

struct chat_bc_checker {
    enum chat_bc_kind kind;
    char path[CHAT_BC_PATH]; /* the plugin's file, or the acl_file; cut: see truncated */
    bool truncated;          /* the path was longer than CHAT_BC_PATH - 1 */
    bool authenticates;      /* a plugin known to check usernames (dynamic-security, 2.1's
                                password-file plugin); another may or may not */
};

/* One listener, as its clients meet the broker's checks. */
struct chat_bc_listener {
    int port;        /* 1883 for the default listener unless `port` */
    bool is_default; /* made from the lines before the first `listener` */
    struct chat_bc_checker chain[CHAT_BC_CHAIN]; /* in the order the broker asks them */
    size_t n_chain;
    bool chain_cut; /* more than CHAT_BC_CHAIN: treated as unknown checkers */
    bool verified;  /* usernames are checked: password_file, psk_file, a TLS
                       identity, a plugin known to (not any plugin: one that
                       checks only access would leave usernames unchecked) */
    int chat_pos;   /* ours in chain[], -1 when absent */
    unsigned chats; /* how many times ours is in chain[] (more than once: refused) */
};

struct chat_broker_conf {
    bool readable; /* every file named could be read */
    int err;       /* errno of the first unreadable file */
    char unreadable[PATH_MAX];
    bool per_listener; /* per_listener_settings true */
    int sys_interval;  /* the broker's sys_interval (10 unless set); 0: no $SYS */
    size_t n_listeners;
    bool too_many; /* more listeners than CHAT_BC_LISTENERS */
    struct chat_bc_listener listeners[CHAT_BC_LISTENERS];
    unsigned chat_lines; /* plugin lines that load mosquitto-chat */
};

/* Reads the configuration file conf (and what it includes) into bc, with
 * self the real path of mosquitto-chat's own .so (to recognise its plugin
 * lines; "" when unknown), by 2.1's rules where v21 (`port` switches the
 * lines that follow to the default listener). Returns false when a file
 * could not be read, as bc->readable says; bc is then what was read
 * before. */
bool chat_broker_conf_read(const char *conf, const char *self, bool v21,
                           struct chat_broker_conf *bc);

/* chat_broker_conf_read for the broker this plugin runs in: the file named by
 * -c on its command line and the .so this code is in. No -c: the broker runs
 * with its defaults and no plugin line (a test harness loading us): bc says
 * one listener with mosquitto-chat alone. */
bool chat_broker_conf_scan(bool v21, struct chat_broker_conf *bc);

/* Why mosquitto-chat must not run in this configuration (another checker
 * before it for some listener, a listener without it, too many listeners),
 * as one log sentence saying what to change, written into buf; NULL when it
 * may run. */
const char *chat_broker_conf_refusal(const struct chat_broker_conf *bc, char *buf, size_t len);

/* Whether the clients of listener l meet another access checker after
 * mosquitto-chat (so that its answers must defer to them). */
bool chat_bc_others(const struct chat_bc_listener *l);

#endif
