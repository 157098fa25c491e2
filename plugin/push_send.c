/* push_send: the sender thread, on libcurl's multi interface (see
 * push_send.h). The thread owns the multi handle and every transfer; the
 * broker's thread touches only the two lists and the figures under the
 * mutex, and wakes the thread with curl_multi_wakeup. */
#include "push_send.h"
#include "chat_mono.h"
#include "push_url.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#define ORIGIN_MAX 300 /* "scheme://host:port", host at most 255 */

/* A notification body's bound: what fits one encrypted UnifiedPush
 * message (PUSH_BODY_MAX with the coding's overhead). */
#define NOTE_MAX (PUSH_BODY_MAX - PUSH_CRYPTO_OVERHEAD)
#define POLL_MAX_MS 1000

/* One transfer in flight. */
struct transfer {
    struct push_job *job;
    CURL *easy;
    struct curl_slist *headers;
    uint8_t *sealed; /* the encrypted body, when the job encrypts */
    char answer[PUSH_ANSWER_MAX + 1];
    size_t answer_len;
    size_t header_bytes;
    long retry_after; /* seconds; -1: none given */
    bool too_big;     /* the answer passed PUSH_ANSWER_MAX */
    bool refused;     /* the address was refused (push_url_addr_ok) */
    char origin[ORIGIN_MAX];
};

struct push_sender {
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    CURLM *multi;
    const struct push_opts *opts;
    /* Under lock: */
    bool stop;
    struct push_job *in_head, *in_tail; /* submitted, not yet taken by the thread */
    struct push_result *res_head, *res_tail;
    size_t held, queue_max;
    struct push_send_stats st;
    uint64_t withdrawn[PUSH_WITHDRAWN_MAX]; /* messages recalled or edited (withdrawn_key) */
    size_t next_withdrawn;
    /* The thread's own: */
    struct push_job *wait_head, *wait_tail; /* taken, waiting for a slot or a retry */
    struct transfer *xfer[PUSH_INFLIGHT];
    int nxfer;
    unsigned seed;
};

/* ===========================================================================
 * Jobs, results, origins
 * ========================================================================= */

void push_job_free(struct push_job *job)
{
    if (!job) {
        return;
    }
    free(job->group);
    free(job->from);
    free(job->text);
    free(job->url);
    free(job->origin);
    free(job->body);
    free(job->lean);
    free(job->pushkey);
    free(job->member);
    free(job->device);
    free(job->reg);
    free(job);
}

void push_result_free(struct push_result *r)
{
    while (r) {
        struct push_result *next = r->next;
        free(r->member);
        free(r->device);
        free(r->reg);
        free(r);
        r = next;
    }
}

void push_url_origin(const char *url, char *out, size_t cap)
{
    const char *p = strstr(url, "://");
    p = p ? strchr(p + 3, '/') : NULL;
    size_t n = p ? (size_t)(p - url) : strlen(url);
    if (n >= cap) {
        n = cap - 1;
    }
    memcpy(out, url, n);
    out[n] = '\0';
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Ends job: its figure, its result (gone or discovered, when given), and
 * its memory. The one place a held job stops being held. */
static void finish(push_sender *s, struct push_job *job, bool sent, bool gone, int status,
                   const char *why)
{
    struct push_result *r = NULL;
    if (gone || job->kind == PUSH_JOB_DISCOVER) {
        r = calloc(1, sizeof(*r));
        if (r) {
            r->kind = gone ? PUSH_RESULT_GONE : PUSH_RESULT_DISCOVERED;
            r->ok = sent;
            r->status = status;
            r->token = job->token;
            r->member = dup_or_null(job->member);
            r->device = dup_or_null(job->device);
            r->reg = job->reg; /* moved */
            r->reg_len = job->reg_len;
            job->reg = NULL;
            snprintf(r->why, sizeof(r->why), "%s", why ? why : "");
        }
    }
    pthread_mutex_lock(&s->lock);
    s->held--;
    if (job->kind == PUSH_JOB_NOTIFY) {
        if (sent) {
            s->st.sent++;
        } else {
            s->st.failed++;
        }
    }
    if (r) {
        if (s->res_tail) {
            s->res_tail->next = r;
        } else {
            s->res_head = r;
        }
        s->res_tail = r;
    }
    pthread_mutex_unlock(&s->lock);
    push_job_free(job);
}

/* A message's key among the withdrawn: its group and id hashed (FNV-1a);
 * a collision only sends another message's notification without its
 * text. 0 marks an empty slot. */
static uint64_t withdrawn_key(const char *group, uint64_t id)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)group; *p; p++) {
        h = (h ^ *p) * 0x100000001b3ull;
    }
    for (int i = 0; i < 8; i++) {
        h = (h ^ ((id >> (8 * i)) & 0xff)) * 0x100000001b3ull;
    }
    return h ? h : 1;
}

/* Whether job's message was withdrawn; the caller holds the lock. */
static bool withdrawn_locked(const push_sender *s, const struct push_job *job)
{
    uint64_t k = withdrawn_key(job->group, job->id);
    for (size_t i = 0; i < PUSH_WITHDRAWN_MAX; i++) {
        if (s->withdrawn[i] == k) {
            return true;
        }
    }
    return false;
}

static void wait_append(push_sender *s, struct push_job *job)
{
    job->next = NULL;
    if (s->wait_tail) {
        s->wait_tail->next = job;
    } else {
        s->wait_head = job;
    }
    s->wait_tail = job;
}

/* ===========================================================================
 * A notification's request, made on this thread
 * ========================================================================= */

/* Fills job's URL and body from its registration and note; false (why
 * set) when there is nothing to post: a registration this code cannot
 * read, a webhook the operator removed, a note too large. */
static bool prepare(const push_sender *s, struct push_job *job, const char **why)
{
    struct push_reg reg;
    bool loopback = false;
    const char *url = NULL;
    struct push_note n = {job->group, job->id,     job->from,  job->unread,
                          job->text,  job->member, job->device};

    if (!push_reg_decode(job->reg, job->reg_len, &reg)) {
        *why = "a registration this code cannot read";
        return false;
    }
    if (!(url = push_reg_target(&reg, s->opts, &loopback))) {
        *why = "its webhook is no longer configured";
        return false;
    }
    if (!(job->url = strdup(url))) {
        *why = "out of memory";
        return false;
    }
    job->loopback = loopback;
    bool text = s->opts->body && n.text;
    if (reg.kind == PUSH_KIND_MATRIX) {
        job->body = push_note_matrix(&n, text, &reg, NOTE_MAX, &job->body_len);
        job->lean = text ? push_note_matrix(&n, false, &reg, NOTE_MAX, &job->lean_len) : NULL;
        job->pushkey = strdup(reg.pushkey);
        if (!job->pushkey) {
            *why = "out of memory";
            return false;
        }
    } else {
        bool who = reg.kind == PUSH_KIND_WEBHOOK;
        job->body = push_note_json(&n, text, who, NOTE_MAX, &job->body_len);
        job->lean = text ? push_note_json(&n, false, who, NOTE_MAX, &job->lean_len) : NULL;
        if (reg.kind == PUSH_KIND_UNIFIEDPUSH && reg.encrypted) {
            job->encrypt = true;
            memcpy(job->p256dh, reg.p256dh, PUSH_KEY_LEN);
            memcpy(job->auth, reg.auth, PUSH_AUTH_LEN);
        }
    }
    if (!job->body && job->lean) {
        /* too large with its text: without */
        job->body = job->lean;
        job->body_len = job->lean_len;
        job->lean = NULL;
    }
    if (!job->body) {
        *why = "the notification does not fit";
        return false;
    }
    return true;
}

/* ===========================================================================
 * One transfer
 * ========================================================================= */

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
    struct transfer *t = ctx;
    size_t len = size * n;
    if (t->answer_len + len > PUSH_ANSWER_MAX) {
        t->too_big = true;
        return 0; /* aborts the transfer */
    }
    memcpy(t->answer + t->answer_len, data, len);
    t->answer_len += len;
    t->answer[t->answer_len] = '\0';
    return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *ctx)
{
    struct transfer *t = ctx;
    size_t len = size * n;
    t->header_bytes += len;
    if (t->header_bytes > PUSH_ANSWER_MAX) {
        t->too_big = true;
        return 0;
    }
    /* A new response (after a 100 Continue) starts over. */
    if (len >= 5 && !strncmp(data, "HTTP/", 5)) {
        t->retry_after = -1;
    }
    static const char name[] = "retry-after:";
    if (len > sizeof(name) - 1 && !strncasecmp(data, name, sizeof(name) - 1)) {
        char value[64];
        size_t v = len - (sizeof(name) - 1);
        if (v >= sizeof(value)) {
            return len;
        }
        memcpy(value, data + sizeof(name) - 1, v);
        value[v] = '\0';
        char *p = value;
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        char *end = NULL;
        long secs = strtol(p, &end, 10);
        if (end != p && secs >= 0) {
            t->retry_after = secs;
        } else {
            /* an HTTP-date */
            time_t when = curl_getdate(p, NULL);
            time_t now = time(NULL);
            if (when != (time_t)-1) {
                t->retry_after = when > now ? (long)(when - now) : 0;
            }
        }
    }
    return len;
}

/* Every connection's address, after DNS: the check that a name cannot be
 * rebound to loopback or link-local between registration and sending. */
static curl_socket_t on_socket(void *ctx, curlsocktype purpose, struct curl_sockaddr *a)
{
    struct transfer *t = ctx;
    if (purpose != CURLSOCKTYPE_IPCXN || !push_url_addr_ok(&a->addr, t->job->loopback)) {
        t->refused = true;
        return CURL_SOCKET_BAD;
    }
    return socket(a->family, a->socktype, a->protocol);
}

static void transfer_free(struct transfer *t)
{
    if (!t) {
        return;
    }
    if (t->easy) {
        curl_easy_cleanup(t->easy);
    }
    curl_slist_free_all(t->headers);
    free(t->sealed);
    free(t);
}

static bool add_header(struct transfer *t, const char *h)
{
    struct curl_slist *l = curl_slist_append(t->headers, h);
    if (!l) {
        return false;
    }
    t->headers = l;
    return true;
}

/* Sets up and adds the transfer of job; false (job untouched) when it
 * cannot start at all. */
static struct transfer *transfer_start(push_sender *s, struct push_job *job, const char **why)
{
    struct transfer *t = calloc(1, sizeof(*t));
    if (!t) {
        *why = "out of memory";
        return NULL;
    }
    t->job = job;
    t->retry_after = -1;
    snprintf(t->origin, sizeof(t->origin), "%s", job->origin);
    t->easy = curl_easy_init();
    if (!t->easy) {
        *why = "libcurl refused a transfer";
        goto fail;
    }
    CURL *e = t->easy;
    bool ok =
        curl_easy_setopt(e, CURLOPT_URL, job->url) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_PROXY, "") == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)PUSH_CONNECT_TIMEOUT_MS) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
                         (long)(job->kind == PUSH_JOB_DISCOVER ? PUSH_DISCOVER_TIMEOUT_MS
                                                               : PUSH_TIMEOUT_MS)) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_MAXFILESIZE, (long)PUSH_ANSWER_MAX) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_WRITEDATA, t) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_HEADERDATA, t) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_socket) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, t) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_PRIVATE, t) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_USERAGENT, "mosquitto-chat") == CURLE_OK &&
        add_header(t, "Expect:");
    if (ok && job->kind == PUSH_JOB_NOTIFY && job->lean && !job->use_lean) {
        /* recalled or edited since the notification was made: its text is
         * no longer the message's */
        pthread_mutex_lock(&s->lock);
        job->use_lean = withdrawn_locked(s, job);
        pthread_mutex_unlock(&s->lock);
    }
    if (ok && job->kind == PUSH_JOB_NOTIFY) {
        const char *body = job->use_lean ? job->lean : job->body;
        size_t len = job->use_lean ? job->lean_len : job->body_len;
        char type[96];
        if (job->encrypt) {
            size_t sealed_len = 0;
            if (!push_crypto_encrypt(job->p256dh, job->auth, body, len, NULL, &t->sealed,
                                     &sealed_len)) {
                *why = "the notification could not be encrypted";
                goto fail;
            }
            body = (const char *)t->sealed;
            len = sealed_len;
            ok = add_header(t, "Content-Encoding: aes128gcm");
        }
        if (len > PUSH_BODY_MAX) {
            *why = "the notification is too large";
            goto fail;
        }
        snprintf(type, sizeof(type), "Content-Type: %s",
                 job->encrypt ? "application/octet-stream" : "application/json");
        /* RFC 8030: keep it a day at the push service, and wake the device
         * now (a chat message is for a person). */
        ok = ok && add_header(t, type) && add_header(t, "TTL: 86400") &&
             add_header(t, "Urgency: high") &&
             curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)len) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_POSTFIELDS, body) == CURLE_OK;
    }
    ok = ok && curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers) == CURLE_OK &&
         curl_multi_add_handle(s->multi, e) == CURLM_OK;
    if (!ok) {
        *why = "libcurl refused the transfer's options";
        goto fail;
    }
    return t;

fail:
    t->job = NULL;
    transfer_free(t);
    return NULL;
}

/* ===========================================================================
 * What an answer means
 * ========================================================================= */

/* {"unifiedpush":{"version":1}}, as the UnifiedPush server spec has a push
 * server answer a GET of an endpoint. */
static bool is_unifiedpush(const char *answer)
{
    cJSON *root = cJSON_Parse(answer);
    const cJSON *up = cJSON_GetObjectItemCaseSensitive(root, "unifiedpush");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(up, "version");
    bool ok = cJSON_IsNumber(v) && v->valuedouble == 1.0;
    cJSON_Delete(root);
    return ok;
}

/* Whether a Matrix gateway's answer {"rejected":[...]} names pushkey. */
static bool rejected(const char *answer, const char *pushkey)
{
    cJSON *root = cJSON_Parse(answer);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "rejected");
    const cJSON *k = NULL;
    bool found = false;
    cJSON_ArrayForEach(k, list)
    {
        found = found || (cJSON_IsString(k) && !strcmp(k->valuestring, pushkey));
    }
    cJSON_Delete(root);
    return found;
}

/* Puts job back to wait until not_before, or ends it when it had its
 * attempts; backoff: about 1, 4, 16 s, each between half and all of it. */
static void retry(push_sender *s, struct push_job *job, int64_t now, long after_s, int status,
                  const char *why)
{
    if (++job->attempts >= PUSH_ATTEMPTS) {
        finish(s, job, false, false, status, why);
        return;
    }
    int64_t wait = 0;
    if (after_s >= 0) {
        wait = (int64_t)after_s * 1000;
    } else {
        int64_t base = 1000LL << (2 * (job->attempts - 1));
        wait = base / 2 + (int64_t)(rand_r(&s->seed) % (unsigned)(base / 2 + 1));
    }
    job->not_before_ms = now + wait;
    pthread_mutex_lock(&s->lock);
    s->st.retried++;
    pthread_mutex_unlock(&s->lock);
    wait_append(s, job);
}

static void done(push_sender *s, struct transfer *t, CURLcode code)
{
    struct push_job *job = t->job;
    long status = 0;
    int64_t now = chat_mono_us() / 1000;
    char why[128];

    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    t->job = NULL;
    if (job->kind == PUSH_JOB_DISCOVER) {
        bool ok = code == CURLE_OK && status >= 200 && status < 300 && is_unifiedpush(t->answer);
        if (code != CURLE_OK) {
            snprintf(why, sizeof(why), "%s",
                     t->refused ? "address refused" : curl_easy_strerror(code));
        } else {
            snprintf(why, sizeof(why), "HTTP %ld%s", status,
                     ok ? "" : " without {\"unifiedpush\":{\"version\":1}}");
        }
        finish(s, job, ok, false, (int)status, why);
        return;
    }
    if (code != CURLE_OK) {
        snprintf(why, sizeof(why), "%s",
                 t->refused   ? "address refused"
                 : t->too_big ? "answer too large"
                              : curl_easy_strerror(code));
        if (t->refused || t->too_big) {
            finish(s, job, false, false, 0, why);
        } else {
            retry(s, job, now, -1, 0, why);
        }
        return;
    }
    snprintf(why, sizeof(why), "HTTP %ld", status);
    if (status >= 200 && status < 300) {
        if (job->pushkey && rejected(t->answer, job->pushkey)) {
            finish(s, job, false, true, (int)status, "the gateway rejected the pushkey");
        } else {
            finish(s, job, true, false, (int)status, why);
        }
    } else if (status == 404 || status == 410) {
        finish(s, job, false, true, (int)status, why);
    } else if (status == 413 && job->lean && !job->use_lean) {
        job->use_lean = true; /* once more, without the message's text */
        retry(s, job, now, 0, (int)status, why);
    } else if (status == 429 || status == 503) {
        if (t->retry_after > PUSH_RETRY_AFTER_MAX) {
            finish(s, job, false, false, (int)status, why);
        } else {
            retry(s, job, now, t->retry_after, (int)status, why);
        }
    } else if (status == 408 || status >= 500) {
        retry(s, job, now, -1, (int)status, why);
    } else {
        finish(s, job, false, false, (int)status, why);
    }
}

/* ===========================================================================
 * The thread
 * ========================================================================= */

static int origin_count(const push_sender *s, const char *origin)
{
    int n = 0;
    for (int i = 0; i < s->nxfer; i++) {
        n += strcmp(s->xfer[i]->origin, origin) == 0;
    }
    return n;
}

/* Starts the waiting jobs that are due, in order, while slots are free;
 * returns the ms until the next one is due (POLL_MAX_MS at most). */
static int64_t start_due(push_sender *s)
{
    int64_t now = chat_mono_us() / 1000, next = POLL_MAX_MS;
    struct push_job *prev = NULL, *job = s->wait_head;
    while (job) {
        struct push_job *following = job->next;
        if (job->not_before_ms > now) {
            next = job->not_before_ms - now < next ? job->not_before_ms - now : next;
            prev = job;
            job = following;
            continue;
        }
        if (s->nxfer == PUSH_INFLIGHT) {
            break;
        }
        if (origin_count(s, job->origin) >= PUSH_PER_ORIGIN) {
            prev = job;
            job = following;
            continue;
        }
        /* unlink */
        if (prev) {
            prev->next = following;
        } else {
            s->wait_head = following;
        }
        if (s->wait_tail == job) {
            s->wait_tail = prev;
        }
        job->next = NULL;
        const char *why = NULL;
        struct transfer *t = transfer_start(s, job, &why);
        if (t) {
            s->xfer[s->nxfer++] = t;
        } else {
            finish(s, job, false, false, 0, why);
        }
        job = following;
    }
    return next;
}

static void reap(push_sender *s)
{
    int left = 0;
    CURLMsg *m = NULL;
    while ((m = curl_multi_info_read(s->multi, &left)) != NULL) {
        if (m->msg != CURLMSG_DONE) {
            continue;
        }
        struct transfer *t = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&t);
        CURLcode code = m->data.result;
        curl_multi_remove_handle(s->multi, m->easy_handle);
        for (int i = 0; i < s->nxfer; i++) {
            if (s->xfer[i] == t) {
                s->xfer[i] = s->xfer[--s->nxfer];
                break;
            }
        }
        if (t) {
            done(s, t, code);
            transfer_free(t);
        }
    }
}

static void *run(void *arg)
{
    push_sender *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        bool stop = s->stop;
        struct push_job *in = s->in_head;
        s->in_head = s->in_tail = NULL;
        pthread_mutex_unlock(&s->lock);
        if (stop) {
            break;
        }
        while (in) {
            struct push_job *next = in->next;
            const char *why = "out of memory";
            char origin[ORIGIN_MAX];
            if ((in->kind == PUSH_JOB_NOTIFY && !in->url && !prepare(s, in, &why)) ||
                (push_url_origin(in->url, origin, sizeof(origin)),
                 !(in->origin = strdup(origin)))) {
                finish(s, in, false, false, 0, why);
            } else {
                wait_append(s, in);
            }
            in = next;
        }
        int running = 0;
        int64_t wait = start_due(s);
        curl_multi_perform(s->multi, &running);
        reap(s);
        /* Slots freed by the answers just read take the next jobs now. */
        int64_t again = start_due(s);
        wait = again < wait ? again : wait;
        curl_multi_perform(s->multi, &running);
        reap(s);
        curl_multi_poll(s->multi, NULL, 0, (int)(wait > 0 ? wait : 0), NULL);
    }
    return NULL;
}

/* ===========================================================================
 * The broker's side
 * ========================================================================= */

push_sender *push_sender_create(size_t queue_max, const struct push_opts *opts, char *err,
                                size_t cap)
{
    push_sender *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    s->queue_max = queue_max;
    s->opts = opts;
    s->seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)s;
    pthread_mutex_init(&s->lock, NULL);
    s->multi = curl_multi_init();
    if (!s->multi) {
        snprintf(err, cap, "libcurl's multi interface could not start");
        push_sender_destroy(s);
        return NULL;
    }
    if (pthread_create(&s->thread, NULL, run, s) != 0) {
        snprintf(err, cap, "the sender thread could not start");
        push_sender_destroy(s);
        return NULL;
    }
    s->started = true;
    return s;
}

void push_sender_destroy(push_sender *s)
{
    if (!s) {
        return;
    }
    if (s->started) {
        pthread_mutex_lock(&s->lock);
        s->stop = true;
        pthread_mutex_unlock(&s->lock);
        curl_multi_wakeup(s->multi);
        pthread_join(s->thread, NULL);
    }
    for (int i = 0; i < s->nxfer; i++) {
        curl_multi_remove_handle(s->multi, s->xfer[i]->easy);
        push_job_free(s->xfer[i]->job);
        transfer_free(s->xfer[i]);
    }
    for (struct push_job *j = s->wait_head, *next = NULL; j; j = next) {
        next = j->next;
        push_job_free(j);
    }
    for (struct push_job *j = s->in_head, *next = NULL; j; j = next) {
        next = j->next;
        push_job_free(j);
    }
    push_result_free(s->res_head);
    if (s->multi) {
        curl_multi_cleanup(s->multi);
    }
    pthread_mutex_destroy(&s->lock);
    free(s);
}

bool push_sender_submit(push_sender *s, struct push_job *job)
{
    job->next = NULL;
    pthread_mutex_lock(&s->lock);
    bool room = s->held < s->queue_max;
    if (room) {
        s->held++;
        if (s->in_tail) {
            s->in_tail->next = job;
        } else {
            s->in_head = job;
        }
        s->in_tail = job;
    } else if (job->kind == PUSH_JOB_NOTIFY) {
        s->st.dropped++;
    }
    pthread_mutex_unlock(&s->lock);
    if (!room) {
        push_job_free(job);
        return false;
    }
    curl_multi_wakeup(s->multi);
    return true;
}

struct push_result *push_sender_results(push_sender *s)
{
    pthread_mutex_lock(&s->lock);
    struct push_result *r = s->res_head;
    s->res_head = s->res_tail = NULL;
    pthread_mutex_unlock(&s->lock);
    return r;
}

void push_sender_stats(push_sender *s, struct push_send_stats *out)
{
    pthread_mutex_lock(&s->lock);
    *out = s->st;
    out->queued = s->held;
    pthread_mutex_unlock(&s->lock);
}

void push_sender_withdraw(push_sender *s, const char *group, uint64_t id)
{
    pthread_mutex_lock(&s->lock);
    s->withdrawn[s->next_withdrawn] = withdrawn_key(group, id);
    s->next_withdrawn = (s->next_withdrawn + 1) % PUSH_WITHDRAWN_MAX;
    /* not prepared yet: the text goes now */
    for (struct push_job *j = s->in_head; j; j = j->next) {
        if (j->kind == PUSH_JOB_NOTIFY && j->id == id && j->group && !strcmp(j->group, group)) {
            free(j->text);
            j->text = NULL;
        }
    }
    pthread_mutex_unlock(&s->lock);
}

void push_sender_count_dropped(push_sender *s)
{
    pthread_mutex_lock(&s->lock);
    s->st.dropped++;
    pthread_mutex_unlock(&s->lock);
}
