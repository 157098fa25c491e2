/* store_job: a maintenance job's thread, state and checks (see
 * store_job.h). */
#include "store_job.h"
#include "store_text.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct store_job {
    const store_job_work *work;
    chat_store *owner; /* the store, which outlives the job */
    void *taken;       /* what work->take returned */
    pthread_t thread;
    pthread_mutex_t mu;
    chat_job_state state; /* under mu */
    atomic_bool cancel;   /* close asks the thread to stop */
    atomic_bool finished; /* the thread has set its result */
    char partial[sizeof(((chat_job_state *)0)->path) + 16];
};

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void store_job_finish(store_job *j, const char *fmt, ...)
{
    pthread_mutex_lock(&j->mu);
    j->state.status = fmt ? CHAT_JOB_FAILED : CHAT_JOB_DONE;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->state.error, sizeof(j->state.error), fmt, ap);
        va_end(ap);
    }
    j->state.finished_ms = wall_ms();
    pthread_mutex_unlock(&j->mu);
    atomic_store(&j->finished, true);
}

void store_job_set_records(store_job *j, uint64_t records)
{
    pthread_mutex_lock(&j->mu);
    j->state.records = records;
    pthread_mutex_unlock(&j->mu);
}

bool store_job_cancelled(store_job *j)
{
    return atomic_load(&j->cancel);
}

chat_job_kind store_job_kind(const store_job *j)
{
    return j->state.kind; /* set before the thread starts, never written again */
}

const char *store_job_dest(const store_job *j)
{
    return j->state.path; /* likewise */
}

const char *store_job_partial(const store_job *j)
{
    return j->partial;
}

static void *job_main(void *arg)
{
    store_job *j = arg;
    j->work->run(j, j->owner, j->taken);
    return NULL;
}

/* Frees a job whose thread has ended or never started (started: joined
 * first). */
static void job_free(store_job *j, bool started)
{
    if (started) {
        pthread_join(j->thread, NULL);
    }
    if (j->taken && j->work->give_back) {
        j->work->give_back(j->owner, j->taken);
    }
    pthread_mutex_destroy(&j->mu);
    free(j);
}

chat_err store_job_start(chat_store *cs, const store_job_work *work, chat_job_kind kind,
                         const char *dest)
{
    struct stat sb;
    if (cs->job && !atomic_load(&cs->job->finished)) {
        store_set_text(cs->last_err, sizeof(cs->last_err), "a %s is under way",
                       cs->job->state.kind == CHAT_JOB_BACKUP ? "backup" : "compaction");
        return CHAT_EINVAL;
    }
    store_job_stop(cs);
    store_job *j = calloc(1, sizeof(*j));
    if (!j) {
        return CHAT_ENOMEM;
    }
    j->work = work;
    j->owner = cs;
    j->state.kind = kind;
    j->state.status = CHAT_JOB_RUNNING;
    j->state.started_ms = wall_ms();
    atomic_init(&j->cancel, false);
    atomic_init(&j->finished, false);
    if (kind == CHAT_JOB_BACKUP) {
        int n = snprintf(j->state.path, sizeof(j->state.path), "%s", dest);
        snprintf(j->partial, sizeof(j->partial), "%s.partial", dest);
        if (n < 0 || (size_t)n >= sizeof(j->state.path) || stat(dest, &sb) == 0 ||
            stat(j->partial, &sb) == 0) {
            store_set_text(cs->last_err, sizeof(cs->last_err),
                           "backup destination too long or already there: %s", dest);
            free(j);
            return CHAT_EINVAL;
        }
    }
    if (work->take) {
        j->taken = work->take(cs, kind);
    }
    pthread_mutex_init(&j->mu, NULL);
    if (store_thread_start(&j->thread, job_main, j) != 0) {
        job_free(j, false);
        store_set_text(cs->last_err, sizeof(cs->last_err), "cannot start the job's thread");
        return CHAT_EIO;
    }
    cs->job = j;
    return CHAT_OK;
}

chat_err store_job_state(chat_store *cs, chat_job_state *out)
{
    store_job *j = cs->job;
    if (!j) {
        memset(out, 0, sizeof(*out));
        return CHAT_OK;
    }
    pthread_mutex_lock(&j->mu);
    *out = j->state;
    pthread_mutex_unlock(&j->mu);
    return CHAT_OK;
}

void store_job_stop(chat_store *cs)
{
    store_job *j = cs->job;
    if (j) {
        atomic_store(&j->cancel, true);
        job_free(j, true);
        cs->job = NULL;
    }
}
