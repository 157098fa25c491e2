/* proto (client side): what the client library makes of the protocol's
 * data, on top of proto/ (chat_proto.h: topics, limits, the name and UTF-8
 * checks, the JSON integer rule and the JSON string writer): integers and
 * envelopes read from cJSON, and the JSON objects the library writes
 * (commands, requests with their correlationData, messages), whose strings
 * all go through chat_proto_json_string.
 *
 * Ownership: stated per function. Threading: pure functions, any thread.
 */
#ifndef CHAT_CLIENT_PROTO_H
#define CHAT_CLIENT_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "chat_client.h"
#include "chat_proto.h"

/* The integer item as a uint64 in [lo, 2^53-1] (the protocol's JSON
 * integers); false if it is missing, not a number or not such an integer. */
bool chat_json_u64(const cJSON *item, uint64_t lo, uint64_t *out);

/* Fills m from an envelope object (strings owned by env; json must be its
 * printed form). Returns false when it is not a valid envelope. */
bool chat_envelope_view(const cJSON *env, const char *json, chat_client_message *m);

/* A JSON object text being written, field by field, from chat_obj o = {0}.
 * A failed allocation stops the writing; chat_obj_end reports it. */
typedef struct chat_obj {
    char *text;
    size_t len, cap;
    bool failed;
} chat_obj;

/* Add "key": value (a string, an integer, true or false). */
void chat_obj_str(chat_obj *o, const char *key, const char *value);
void chat_obj_u64(chat_obj *o, const char *key, uint64_t value);
void chat_obj_bool(chat_obj *o, const char *key, bool value);
/* ... or "key": json, a JSON value's text as it is (the caller's valid
 * JSON, e.g. cJSON's print of a value). */
void chat_obj_raw(chat_obj *o, const char *key, const char *json);

/* Closes the object and returns its text (heap memory, freed with free()),
 * or NULL when out of memory; o is empty again either way. */
char *chat_obj_end(chat_obj *o);

/* The request {"commands":[command with "correlationData": corr]} for one
 * command object text (as chat_obj_end wrote it); heap memory freed with
 * free(), or NULL when out of memory. */
char *chat_request_text(const char *command, const char *corr);

#endif
