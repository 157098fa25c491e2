/* conn.c: the connection's life (see conn.h). */
#include "conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

#define BACKOFF_FIRST_MS 250 /* first pause before reconnecting */
/* After a lost connection the first pause is BACKOFF_FIRST_MS plus up to
 * this much, drawn evenly: devices that lose the broker at the same moment
 * (a restart, a network blip) come back over a second rather than within
 * the 60 ms that +-12 % of 250 ms gives, and a broker handles 200 returning
 * devices spread over a second without holding up its other clients
 * (docs/scaling.md, "Reconnect storms"). */
#define LOSS_SPREAD_MS 1000

void chat_conn_init(chat_conn *cn, const struct chat_conn_cfg *cfg, int connect_timeout_ms,
                    unsigned seed)
{
    memset(cn, 0, sizeof *cn);
    cn->cfg = *cfg;
    cn->connect_timeout_ms = connect_timeout_ms;
    cn->backoff_ms = BACKOFF_FIRST_MS;
    cn->rng = seed;
    cn->state = CONN_IDLE;
}

/* When to try again after a failed or lost connection: doubling pauses with
 * some jitter, so that a restarted broker is not hit by every client at once. */
static void schedule(chat_conn *cn)
{
    int64_t pause = cn->backoff_ms;
    int max_ms = cn->cfg.reconnect_max_s * 1000;

    pause += (int64_t)(rand_r(&cn->rng) % (unsigned)(cn->backoff_ms / 4 + 1)) - cn->backoff_ms / 8;
    cn->reconnect_at = chat_now_ms() + pause;
    if (cn->backoff_ms < max_ms)
        cn->backoff_ms = cn->backoff_ms * 2 < max_ms ? cn->backoff_ms * 2 : max_ms;
}

/* The first attempt after a lost connection (see LOSS_SPREAD_MS); the
 * pauses after it double from 2 x BACKOFF_FIRST_MS as schedule's do. */
static void schedule_after_loss(chat_conn *cn)
{
    int max_ms = cn->cfg.reconnect_max_s * 1000;
    /* Never longer than reconnect_max_s, the longest pause promised. */
    int spread =
        max_ms - BACKOFF_FIRST_MS < LOSS_SPREAD_MS ? max_ms - BACKOFF_FIRST_MS : LOSS_SPREAD_MS;
    int64_t pause = BACKOFF_FIRST_MS;

    if (spread > 0)
        pause += (int64_t)(rand_r(&cn->rng) % (unsigned)spread);
    cn->reconnect_at = chat_now_ms() + pause;
    cn->backoff_ms = 2 * BACKOFF_FIRST_MS < max_ms ? 2 * BACKOFF_FIRST_MS : max_ms;
}

void chat_conn_close(chat_conn *cn)
{
    chat_paho_close(cn->cfg.paho);
    cn->state = CONN_IDLE;
}

void chat_conn_failed(chat_conn *cn, int code, const char *text)
{
    char why[CHAT_REASON_MAX];

    if (code > 0 && cn->cfg.paho->cfg.version >= 5)
        snprintf(why, sizeof why, "the broker refused the connection: %s",
                 MQTTReasonCode_toString((enum MQTTReasonCodes)code));
    else if (code > 0)
        snprintf(why, sizeof why, "the broker refused the connection (CONNACK code %d)", code);
    else
        snprintf(why, sizeof why, "cannot connect to %s: %s", cn->cfg.paho->cfg.uri,
                 text != NULL ? text : MQTTAsync_strerror(code));
    chat_conn_close(cn);
    /* A refusal (bad credentials, not authorised) is the broker's answer,
     * not a network failure: callers may stop rather than wait. Nobody waits
     * on a retry in the background: the application hears of a refusal
     * there by an event, or it would retry unnoticed for ever. */
    if (code > 0 && !chat_calls_any(cn->cfg.calls, CALL_CONNECT))
        chat_notify_error(cn->cfg.notify, NULL, "%s", why);
    chat_calls_finish(cn->cfg.queue, cn->cfg.calls, CALL_CONNECT,
                      code > 0 ? CHAT_CLIENT_ERR_REFUSED : CHAT_CLIENT_ERR_CONNECT, why);
    if (cn->want)
        schedule(cn);
}

static void attempt(chat_conn *cn)
{
    int rc;

    cn->state = CONN_CONNECTING;
    cn->server_reason = 0;
    cn->server_reason_text[0] = '\0';
    rc = chat_paho_open(cn->cfg.paho, cn->connect_timeout_ms);
    if (rc != MQTTASYNC_SUCCESS)
        chat_conn_failed(cn, rc, NULL);
}

void chat_conn_want(chat_conn *cn, int timeout_ms)
{
    cn->want = true;
    cn->connect_timeout_ms = timeout_ms;
    if (cn->state == CONN_IDLE) {
        cn->backoff_ms = BACKOFF_FIRST_MS;
        attempt(cn);
    }
}

void chat_conn_unwant(chat_conn *cn)
{
    cn->want = false;
}

void chat_conn_up(chat_conn *cn)
{
    chat_client_event ev;

    cn->state = CONN_UP;
    cn->backoff_ms = BACKOFF_FIRST_MS;
    chat_paho_set_up(cn->cfg.paho, true);
    memset(&ev, 0, sizeof ev);
    ev.type = CHAT_CLIENT_EV_CONNECTED;
    chat_notify_event(cn->cfg.notify, &ev);
}

void chat_conn_server_disconnect(chat_conn *cn, int code, const char *text)
{
    cn->server_reason = code;
    snprintf(cn->server_reason_text, sizeof cn->server_reason_text, "%s", text != NULL ? text : "");
}

void chat_conn_lost(chat_conn *cn, const char *why)
{
    chat_client_event ev;
    char text[CHAT_REASON_MAX];
    int code = cn->server_reason;

    memset(&ev, 0, sizeof ev);
    ev.type = CHAT_CLIENT_EV_DISCONNECTED;
    ev.reason = why;
    if (code > 0) {
        /* MQTT 5: the broker said why in its DISCONNECT. */
        snprintf(text, sizeof text, "the broker disconnected this client: %s (0x%02X)%s%s%s",
                 MQTTReasonCode_toString((enum MQTTReasonCodes)code), (unsigned)code,
                 code == MQTTREASONCODE_SESSION_TAKEN_OVER
                     ? ", another client connected with the same client id"
                     : "",
                 cn->server_reason_text[0] != '\0' ? ": " : "", cn->server_reason_text);
        ev.reason = text;
        ev.code = code;
    }
    chat_notify_event(cn->cfg.notify, &ev);
    if (cn->want)
        schedule_after_loss(cn);
}

bool chat_conn_disconnect(chat_conn *cn, int timeout_ms)
{
    if (chat_paho_disconnect(cn->cfg.paho, timeout_ms) != MQTTASYNC_SUCCESS)
        return false;
    cn->state = CONN_CLOSING;
    chat_paho_set_up(cn->cfg.paho, false); /* nothing more goes out */
    return true;
}

void chat_conn_tick(chat_conn *cn, int64_t now)
{
    if (cn->state == CONN_IDLE && cn->want && now >= cn->reconnect_at)
        attempt(cn);
}

int64_t chat_conn_next_wake(const chat_conn *cn, int64_t t)
{
    if (cn->state == CONN_IDLE && cn->want && cn->reconnect_at < t)
        return cn->reconnect_at;
    return t;
}
