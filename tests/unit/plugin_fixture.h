/* plugin_fixture: a struct chat_plugin as mosquitto_plugin_init would make
 * it, on a real store in a fresh temporary directory, for the unit tests and
 * fuzzers that drive the plugin's modules through the stubbed broker API
 * (plugin_stubs.h).
 *
 * Ownership: the fixture owns the plugin's state and the directory until
 * plugin_fixture_close, which removes both. Threading: none.
 */
#ifndef CHAT_PLUGIN_FIXTURE_H
#define CHAT_PLUGIN_FIXTURE_H

#include "access.h"
#include "plugin_stubs.h"

struct plugin_fixture {
    char dir[64]; /* the store's directory, removed at close */
    struct chat_plugin pl;
};

/* Fills fx: options opts ("key=value" strings, NULL-terminated; NULL: the
 * defaults), then the store in a new directory and the module states, with
 * the broker as one listener whose clients meet mosquitto-chat alone and
 * whose usernames are not verified (chat_broker_set_test changes that).
 * Returns false (with a line on stderr, fx released) on failure. */
bool plugin_fixture_open(struct plugin_fixture *fx, const char *const *opts);

/* Frees the plugin's state, closes the store and removes its directory.
 * Accepts a fixture that failed to open. */
void plugin_fixture_close(struct plugin_fixture *fx);

/* Removes path and everything below it (symlinks are not followed). */
void plugin_rm_tree(const char *path);

/* Appends a message to group as from: the envelope {"id":<id>,"b":"x...x",
 * "ts":<ts>}, padded to exactly size bytes (at least 48) while ts has 13
 * digits (until the year 2286). *id (may be NULL) receives its id. */
chat_err plugin_append(chat_store *st, const char *group, const char *from, size_t size,
                       uint64_t *id);

/* A connected client with that id and username (either may be NULL), clean
 * session, MQTT 5. */
struct mosquitto plugin_client(const char *id, const char *username);

#endif
