/* queue.c: the dispatcher's inbox and the calls in it (see queue.h). */
#include "queue.h"

#include <stdio.h>
#include <stdlib.h>

#include "clock.h"

struct call *chat_call_new(enum call_op op)
{
    struct call *call = calloc(1, sizeof *call);

    if (call != NULL)
        call->op = op;
    return call;
}

void chat_call_free(struct call *call)
{
    if (call == NULL)
        return;
    free(call->group);
    free(call->payload);
    cJSON_Delete(call->entry);
    for (size_t i = 0; i < call->ntexts; i++)
        free(call->texts[i]);
    free(call->texts);
    free(call->lens);
    free(call);
}

struct event *chat_event_new(enum ev_kind kind, uint32_t epoch)
{
    struct event *ev = calloc(1, sizeof *ev);

    if (ev != NULL) {
        ev->kind = kind;
        ev->epoch = epoch;
    }
    return ev;
}

void chat_event_free(struct event *ev)
{
    if (ev == NULL)
        return;
    free(ev->topic);
    free(ev->payload);
    free(ev->text);
    free(ev);
}

bool chat_queue_init(struct chat_queue *q)
{
    pthread_condattr_t ca;
    bool ok;

    if (pthread_condattr_init(&ca) != 0)
        return false;
    /* Deadlines are monotonic (clock.h): so are the waits. */
    ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
         pthread_mutex_init(&q->mu, NULL) == 0;
    if (ok && pthread_cond_init(&q->wake, &ca) != 0) {
        pthread_mutex_destroy(&q->mu);
        ok = false;
    }
    if (ok && pthread_cond_init(&q->done, &ca) != 0) {
        pthread_cond_destroy(&q->wake);
        pthread_mutex_destroy(&q->mu);
        ok = false;
    }
    pthread_condattr_destroy(&ca);
    q->ready = ok;
    return ok;
}

void chat_queue_destroy(struct chat_queue *q)
{
    if (!q->ready)
        return;
    while (q->head != NULL) {
        struct event *ev = q->head;
        q->head = ev->next;
        if (ev->call != NULL)
            chat_queue_finish(q, ev->call, CHAT_CLIENT_ERR_CLOSED, NULL);
        chat_event_free(ev);
    }
    q->tail = NULL;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->wake);
    pthread_cond_destroy(&q->done);
    q->ready = false;
}

void chat_queue_post(struct chat_queue *q, struct event *ev)
{
    ev->next = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->tail != NULL)
        q->tail->next = ev;
    else
        q->head = ev;
    q->tail = ev;
    pthread_cond_signal(&q->wake);
    pthread_mutex_unlock(&q->mu);
}

void chat_queue_post_lost(struct chat_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->lost_news = true;
    pthread_cond_signal(&q->wake);
    pthread_mutex_unlock(&q->mu);
}

bool chat_queue_post_call(struct chat_queue *q, struct call *call, int timeout_ms)
{
    struct event *ev = chat_event_new(EV_CALL, 0);

    if (ev == NULL)
        return false;
    call->timeout_ms = timeout_ms;
    call->deadline = chat_now_ms() + timeout_ms;
    ev->call = call;
    chat_queue_post(q, ev);
    return true;
}

bool chat_queue_pop(struct chat_queue *q, int64_t wake, struct event **ev, bool *lost_news)
{
    int64_t now = chat_now_ms();

    pthread_mutex_lock(&q->mu);
    while (q->head == NULL && !q->stopping && !q->lost_news && now < wake) {
        struct timespec ts = chat_ms_timespec(wake);
        pthread_cond_timedwait(&q->wake, &q->mu, &ts);
        now = chat_now_ms();
    }
    if (q->stopping) {
        pthread_mutex_unlock(&q->mu);
        return false;
    }
    *ev = q->head;
    if (*ev != NULL) {
        q->head = (*ev)->next;
        if (q->head == NULL)
            q->tail = NULL;
    }
    *lost_news = q->lost_news;
    q->lost_news = false;
    pthread_mutex_unlock(&q->mu);
    return true;
}

void chat_queue_stop(struct chat_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->stopping = true;
    pthread_cond_signal(&q->wake);
    pthread_mutex_unlock(&q->mu);
}

void chat_queue_finish(struct chat_queue *q, struct call *call, chat_client_err err,
                       const char *reason)
{
    bool free_it;

    pthread_mutex_lock(&q->mu);
    call->err = err;
    snprintf(call->reason, sizeof call->reason, "%s", reason ? reason : "");
    call->done = true;
    free_it = !call->waited || call->abandoned;
    if (!free_it)
        pthread_cond_broadcast(&q->done);
    pthread_mutex_unlock(&q->mu);
    if (free_it)
        chat_call_free(call);
}

bool chat_queue_wait(struct chat_queue *q, struct call *call, int64_t until)
{
    bool done;

    pthread_mutex_lock(&q->mu);
    for (int i = 0; !call->done && i < 1000000 && chat_now_ms() < until; i++) {
        struct timespec ts = chat_ms_timespec(until);
        pthread_cond_timedwait(&q->done, &q->mu, &ts);
    }
    done = call->done;
    if (!done)
        call->abandoned = true; /* the dispatcher frees it */
    pthread_mutex_unlock(&q->mu);
    return done;
}

void chat_calls_add(struct chat_calls *l, struct call *call)
{
    call->next = l->head;
    l->head = call;
}

void chat_calls_remove(struct chat_calls *l, struct call *call)
{
    struct call **pp = &l->head;

    while (*pp != NULL && *pp != call)
        pp = &(*pp)->next;
    if (*pp != NULL)
        *pp = call->next;
    call->next = NULL;
}

bool chat_calls_any(const struct chat_calls *l, enum call_op op)
{
    for (const struct call *call = l->head; call != NULL; call = call->next)
        if (call->op == op)
            return true;
    return false;
}

void chat_calls_finish(struct chat_queue *q, struct chat_calls *l, enum call_op op,
                       chat_client_err err, const char *why)
{
    struct call **pp = &l->head;

    while (*pp != NULL) {
        struct call *call = *pp;
        if (call->op != op) {
            pp = &call->next;
            continue;
        }
        *pp = call->next;
        chat_queue_finish(q, call, err, why);
    }
}

void chat_calls_finish_all(struct chat_queue *q, struct chat_calls *l, chat_client_err err)
{
    while (l->head != NULL) {
        struct call *call = l->head;
        l->head = call->next;
        chat_queue_finish(q, call, err, NULL);
    }
}
