/* integ_dropin_setup: the three broker setups integ_dropin compares with
 * and without mosquitto-chat (see integ_dropin.c): their users and
 * passwords, the password file and ACL file of passwd, the
 * dynamic-security configuration of dynsec, and the broker started from
 * each. The files are written in the broker's own directory before it is
 * launched. Threading: the test's main thread only.
 */
#ifndef INTEG_DROPIN_SETUP_H
#define INTEG_DROPIN_SETUP_H

#include "harness.h"

#include <stdbool.h>

enum setup { ANONYMOUS, PASSWD, DYNSEC };

#define DROPIN_USERS 3

/* The users every setup knows (the anonymous one ignores them). */
extern const char *const dropin_users[DROPIN_USERS];

/* user's password in the passwd and dynsec setups. Static storage, valid
 * until the next call. */
const char *dropin_password(const char *user);

/* The dynamic-security plugin the dynsec setup loads (its path, kept as a
 * copy); to be called before dropin_start(DYNSEC, ...). */
void dropin_use_dynsec(const char *path);

/* Creates and launches a broker of setup, with the chat plugin or without
 * it (the same configuration otherwise). The caller destroys it with
 * ts_broker_destroy. */
ts_broker *dropin_start(enum setup setup, bool with_chat);

/* A broker with the dynsec setup's dynamic-security plugin loaded after
 * mosquitto-chat (chat_first) or before it, with plugin_opts, created (its
 * files written) but not launched; the caller launches and destroys it. */
ts_broker *dropin_create_dynsec(const char *const *plugin_opts, bool chat_first);

#endif
