/* response: what comes on the response topic, entry by entry: answers to
 * our requests (by correlationData, request.h), replay pages (delivery.h),
 * pushed read markers and presence (receipts.h), and error entries about what we published (refused
 * messages, subscribes and acks) or a request refused whole. It also finishes the internal requests
 * that were given up.
 *
 * Threading: the dispatcher thread only.
 */
#ifndef CHAT_CLIENT_RESPONSE_H
#define CHAT_CLIENT_RESPONSE_H

#include "delivery.h"
#include "group.h"
#include "notify.h"
#include "outbox.h"
#include "paho.h"
#include "queue.h"
#include "receipts.h"
#include "request.h"

/* The modules answers are about (borrowed). */
typedef struct chat_responses {
    chat_requests *requests;
    chat_delivery *delivery;
    chat_groups *groups;
    chat_outbox *outbox;
    chat_paho *paho;
    struct chat_queue *queue;
    const chat_notify *notify;
    const chat_receipts *receipts;
} chat_responses;

/* A message on the response topic (an EV_MESSAGE). */
void chat_response_handle(const chat_responses *rs, const struct event *ev);

/* Finishes internal request r (taken), given up unanswered: a sync goes
 * again, a gap's timer fetches again, a refused subscription is reported
 * without the plugin's reason. */
void chat_response_expired(const chat_responses *rs, struct chat_request *r);

#endif
