/* mosq.h: the broker's plugin API, from whichever headers the broker
 * installed, so that the plugin builds without a warning against Mosquitto
 * 2.0 and 2.1.
 *
 * Mosquitto 2.1 declares its whole API (client library, broker, plugin,
 * MQTT constants, and the allocator mosquitto_malloc/realloc/free, now in
 * libcommon) through <mosquitto.h>; its 2.0 names (<mosquitto_broker.h> ...)
 * remain as stubs that #warning, and <mosquitto_broker.h> alone no longer
 * declares the allocator. 2.0 has the 2.0 names only, and there <mosquitto.h>
 * is the client library. CMake defines CHAT_MOSQUITTO_ONE_HEADER when the
 * broker's headers have <mosquitto/broker.h> (2.1 on).
 *
 * Events that only newer brokers have are named here too (CHAT_EVT_*), so
 * that code referring to them compiles against 2.0's headers; registering
 * one with a broker that does not know it is refused at run time, which the
 * caller handles.
 */
#ifndef CHAT_MOSQ_H
#define CHAT_MOSQ_H

#ifdef CHAT_MOSQUITTO_ONE_HEADER
#include <mosquitto.h>
#else
#include <mosquitto_broker.h>
#include <mosquitto_plugin.h>
#include <mosquitto.h>
#include <mqtt_protocol.h>
#endif

/* MOSQ_EVT_CLIENT_OFFLINE (2.1 on): a client with a persistent session went
 * away, its session kept. 2.1 fires it instead of MOSQ_EVT_DISCONNECT for
 * such a client. The number is the broker's ABI (enum mosquitto_plugin_event
 * of 2.1's <mosquitto/broker.h>), so it is the same whatever headers we built
 * with. */
#define CHAT_EVT_CLIENT_OFFLINE 28

/* Its event data: 2.1's struct mosquitto_evt_client_offline. */
struct chat_evt_client_offline {
    void *future;
    struct mosquitto *client;
    int reason;
    void *future2[4];
};

/* MOSQ_ERR_PLUGIN_IGNORE (2.1 on): an access checker's "no opinion". 2.1
 * goes on to the next checker as after "defer", but when every checker
 * ignores (or there is none), the broker decides as if none were loaded,
 * where "defer" from all of them is a denial. A 2.0 broker knows no such
 * answer: only for 2.1. The broker's ABI, as above. */
#define CHAT_PLUGIN_IGNORE 32

#ifdef CHAT_MOSQUITTO_ONE_HEADER
#include <stddef.h>
_Static_assert(CHAT_PLUGIN_IGNORE == MOSQ_ERR_PLUGIN_IGNORE,
               "the broker's headers number MOSQ_ERR_PLUGIN_IGNORE differently");
_Static_assert(CHAT_EVT_CLIENT_OFFLINE == MOSQ_EVT_CLIENT_OFFLINE,
               "the broker's headers number MOSQ_EVT_CLIENT_OFFLINE differently");
_Static_assert(offsetof(struct chat_evt_client_offline, client) ==
                   offsetof(struct mosquitto_evt_client_offline, client),
               "the broker's headers lay out struct mosquitto_evt_client_offline differently");
#endif

#endif
