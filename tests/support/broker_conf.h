/* broker_conf: what a test broker is given: its configuration file, the
 * user it runs as, its environment, and with CHAT_TEST_PG_PORT its own
 * PostgreSQL database. Private to tests/support: broker.c starts and stops
 * the broker, this file only writes what it starts from; both see the
 * fields of struct ts_broker, defined here. Threading: the test's main
 * thread only.
 */
#ifndef CHAT_TS_BROKER_CONF_H
#define CHAT_TS_BROKER_CONF_H

#include "broker.h"

#include <stdbool.h>
#include <sys/types.h>

#define PATH_LEN 512

struct ts_broker {
    char dir[64];          /* the temporary directory (a fixed short template) */
    char db[PATH_LEN];     /* <dir>/db: the plugin's LevelDB store */
    char conf[PATH_LEN];   /* <dir>/mosquitto.conf */
    char log[PATH_LEN];    /* <dir>/mosquitto.log: log_dest file */
    char out[PATH_LEN];    /* <dir>/broker.out: the broker's stdout and stderr */
    char **opts;           /* plugin_opt_* lines without the prefix, NULL-terminated */
    char **lines;          /* global lines before the plugin line, NULL-terminated */
    char **after;          /* lines after the chat plugin's options, NULL-terminated */
    char **top;            /* lines before the listener, NULL-terminated */
    bool without_chat;     /* the chat plugin is left out of the configuration */
    bool no_anonymous;     /* allow_anonymous false */
    char run_as[64];       /* the `user` line */
    bool private_conf;     /* mosquitto.conf mode 0600 */
    long clock_shift;      /* seconds the plugin's clock runs ahead (0: none) */
    char pg_conninfo[160]; /* CHAT_TEST_PG_PORT: the broker's own database, "" for LevelDB */
    bool suppress;         /* <dir>/lsan.supp names leaks LeakSanitizer ignores */
    int port;              /* 127.0.0.1 port of the listener */
    pid_t pid;             /* running broker, 0 when stopped */
    int starts;            /* successful starts, for messages */
};

/* A heap copy of a NULL-terminated array of strings (an empty one for
 * NULL), freed with ts_lines_free (which accepts NULL). Out of memory
 * fails the test. */
char **ts_lines_copy(const char *const *lines);
void ts_lines_free(char **lines);

/* Writes b's mosquitto.conf (mode 0600 when private_conf), "@DIR@" in its
 * lines replaced by b->dir; fails the test when it cannot. */
void ts_conf_write(const ts_broker *b);

/* Gives the broker's store and log to the user it runs as (nothing for
 * root), and lets that user into the directory; fails the test when it
 * cannot. */
void ts_conf_hand_over(const ts_broker *b);

/* The broker's environment, NULL-terminated: ours, with the changes that
 * CHAT_BROKER_PRELOAD, leak suppressions and a shifted clock ask for (see
 * broker_conf.c). Static storage: valid until the next call. */
char **ts_conf_env(const ts_broker *b);

/* With CHAT_TEST_PG_PORT set, creates the broker's own database on that
 * cluster and sets b->pg_conninfo; nothing otherwise. */
void ts_conf_pg_database(ts_broker *b);

#endif
