/* state.c: the state file of the client library (last id shown per group). */
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_HEADER "# mosquitto-chat client state: the last message id shown, per group\n"
#define MAX_LINE 512 /* an id, a blank and a 128-byte group fit easily */
/* Bytes of lines appended before the file is rewritten whole: a rewrite
 * (rename over the old file) costs ~60-140 us on ext4, which starts writing
 * the new file's blocks out at once; an append costs ~2 us. */
#define LOG_MAX 65536

struct state_entry {
    char *group;
    uint64_t shown;
    bool changed; /* shown differs from what the file says */
};

struct chat_state {
    char *path;              /* the state file */
    char *tmp;               /* <path>.tmp: written, then renamed over path */
    int lock_fd;             /* <path>.lock, write-locked while open */
    int log_fd;              /* path opened to append to, or -1: rewrite it first */
    size_t log_bytes;        /* bytes appended since the last rewrite */
    struct state_entry *ent; /* one per group, in first-seen order */
    size_t n, cap;
    char incarnation[65]; /* "" when none recorded */
    bool dirty;           /* records changed since the file was last written */
};

static chat_client_err save(chat_state *st, char *why, size_t why_size);

static char *concat(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);

    if (s != NULL) {
        /* NOLINTNEXTLINE(bugprone-not-null-terminated-result): the next line's NUL ends it */
        memcpy(s, a, la);
        memcpy(s + la, b, lb + 1);
    }
    return s;
}

static struct state_entry *find(const chat_state *st, const char *group)
{
    for (size_t i = 0; i < st->n; i++)
        if (strcmp(st->ent[i].group, group) == 0)
            return &st->ent[i];
    return NULL;
}

/* Adds a new entry; returns it, or NULL when out of memory. */
static struct state_entry *add(chat_state *st, const char *group, uint64_t shown)
{
    struct state_entry *e;

    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 8;
        e = realloc(st->ent, cap * sizeof *e);
        if (e == NULL)
            return NULL;
        st->ent = e;
        st->cap = cap;
    }
    e = &st->ent[st->n];
    if ((e->group = strdup(group)) == NULL)
        return NULL;
    e->shown = shown;
    e->changed = false;
    st->n++;
    return e;
}

/* Parses one line without its newline into st. Returns 0, or -1 with why
 * set. */
static int parse_line(chat_state *st, char *line, int lineno, char *why, size_t why_size)
{
    char *end = NULL;
    unsigned long long v;
    const char *bad;
    struct state_entry *e;

    if (line[0] == '#' || line[0] == '\0')
        return 0;
    if (strncmp(line, "@incarnation ", 13) == 0) {
        const char *inc = line + 13;
        if (strlen(inc) >= sizeof st->incarnation ||
            strspn(inc, "0123456789abcdef") != strlen(inc)) {
            snprintf(why, why_size, "%s:%d: bad incarnation", st->path, lineno);
            return -1;
        }
        snprintf(st->incarnation, sizeof st->incarnation, "%s", inc);
        return 0;
    }
    errno = 0;
    v = line[0] >= '0' && line[0] <= '9' ? strtoull(line, &end, 10) : 0;
    if (end == NULL || errno != 0 || *end != ' ') {
        snprintf(why, why_size, "%s:%d: expected \"<id> <group>\"", st->path, lineno);
        return -1;
    }
    if ((bad = chat_client_group_error(end + 1)) != NULL) {
        snprintf(why, why_size, "%s:%d: %s", st->path, lineno, bad);
        return -1;
    }
    if ((e = find(st, end + 1)) != NULL) {
        e->shown = (uint64_t)v; /* appended after the line it updates */
        return 0;
    }
    if (add(st, end + 1, (uint64_t)v) == NULL) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    return 0;
}

static chat_client_err load(chat_state *st, char *why, size_t why_size)
{
    FILE *f = fopen(st->path, "r");
    char line[MAX_LINE + 2];
    int lineno = 0;
    chat_client_err rc = CHAT_CLIENT_OK;

    if (f == NULL) {
        if (errno == ENOENT)
            return CHAT_CLIENT_OK;
        snprintf(why, why_size, "cannot read %s: %s", st->path, strerror(errno));
        return CHAT_CLIENT_ERR_STATE;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        size_t len = strlen(line);
        lineno++;
        if (len > 0 && line[len - 1] != '\n' && len < sizeof line - 1 && feof(f))
            break; /* an append cut short (see append()): the older line stands */
        if (len == 0 || line[len - 1] != '\n') {
            snprintf(why, why_size, "%s:%d: line too long or not terminated", st->path, lineno);
            rc = CHAT_CLIENT_ERR_STATE;
            goto fail;
        }
        line[len - 1] = '\0';
        if (parse_line(st, line, lineno, why, why_size) != 0) {
            rc = CHAT_CLIENT_ERR_STATE;
            goto fail;
        }
    }
    if (ferror(f)) {
        snprintf(why, why_size, "cannot read %s: %s", st->path, strerror(errno));
        rc = CHAT_CLIENT_ERR_STATE;
    }
fail:
    fclose(f);
    return rc;
}

chat_client_err chat_state_open(const char *path, chat_state **out, char *why, size_t why_size)
{
    chat_state *st = calloc(1, sizeof *st);
    char *lock_path = NULL;
    struct flock fl;
    chat_client_err rc = CHAT_CLIENT_ERR_NOMEM;

    *out = NULL;
    snprintf(why, why_size, "out of memory");
    if (st == NULL)
        return CHAT_CLIENT_ERR_NOMEM;
    st->lock_fd = -1;
    st->log_fd = -1;
    if ((st->path = strdup(path)) == NULL || (st->tmp = concat(path, ".tmp")) == NULL ||
        (lock_path = concat(path, ".lock")) == NULL)
        goto fail;
    rc = CHAT_CLIENT_ERR_STATE;
    st->lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (st->lock_fd < 0) {
        snprintf(why, why_size, "cannot open %s: %s", lock_path, strerror(errno));
        goto fail;
    }
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    if (fcntl(st->lock_fd, F_SETLK, &fl) != 0) {
        if (errno == EACCES || errno == EAGAIN) {
            rc = CHAT_CLIENT_ERR_IN_USE;
            snprintf(why, why_size, "%s is in use by another process", path);
        } else {
            snprintf(why, why_size, "cannot lock %s: %s", lock_path, strerror(errno));
        }
        goto fail;
    }
    if ((rc = load(st, why, why_size)) != CHAT_CLIENT_OK)
        goto fail;
    free(lock_path);
    why[0] = '\0';
    *out = st;
    return CHAT_CLIENT_OK;

fail:
    free(lock_path);
    chat_state_close(st);
    return rc;
}

void chat_state_close(chat_state *st)
{
    char why[256];

    if (st == NULL)
        return;
    if (st->log_fd >= 0) {
        /* Leave the file in its short form (one line per group) when lines
         * were appended; what it says stays the same. */
        if (st->log_bytes > 0 && !st->dirty)
            (void)save(st, why, sizeof why);
        close(st->log_fd);
    }
    if (st->lock_fd >= 0)
        close(st->lock_fd); /* releases the lock */
    for (size_t i = 0; i < st->n; i++)
        free(st->ent[i].group);
    free(st->ent);
    free(st->path);
    free(st->tmp);
    free(st);
}

size_t chat_state_count(const chat_state *st)
{
    return st->n;
}

const char *chat_state_group(const chat_state *st, size_t i, uint64_t *shown)
{
    *shown = st->ent[i].shown;
    return st->ent[i].group;
}

/* Writes the whole state to st->tmp and renames it over st->path, then
 * opens the new file for appending. No fsync:
 * the file must survive the process, not the machine (after a power loss an
 * older state shows some messages again; see delivery.h, state-before-ack). */
static chat_client_err save(chat_state *st, char *why, size_t why_size)
{
    FILE *f = fopen(st->tmp, "w");
    int ok;

    if (f == NULL) {
        snprintf(why, why_size, "cannot write %s: %s", st->tmp, strerror(errno));
        return CHAT_CLIENT_ERR_STATE;
    }
    ok = fputs(STATE_HEADER, f) >= 0;
    if (ok && st->incarnation[0])
        ok = fprintf(f, "@incarnation %s\n", st->incarnation) > 0;
    for (size_t i = 0; ok && i < st->n; i++)
        ok = fprintf(f, "%llu %s\n", (unsigned long long)st->ent[i].shown, st->ent[i].group) > 0;
    if (fclose(f) != 0)
        ok = 0;
    if (!ok) {
        snprintf(why, why_size, "cannot write %s: %s", st->tmp, strerror(errno));
        unlink(st->tmp);
        return CHAT_CLIENT_ERR_STATE;
    }
    if (rename(st->tmp, st->path) != 0) {
        snprintf(why, why_size, "cannot rename %s to %s: %s", st->tmp, st->path, strerror(errno));
        unlink(st->tmp);
        return CHAT_CLIENT_ERR_STATE;
    }
    for (size_t i = 0; i < st->n; i++)
        st->ent[i].changed = false;
    st->dirty = false;
    /* Later changes are appended to the new file (-1: rewritten again). */
    if (st->log_fd >= 0)
        close(st->log_fd);
    st->log_fd = open(st->path, O_WRONLY | O_APPEND | O_CLOEXEC);
    st->log_bytes = 0;
    return CHAT_CLIENT_OK;
}

/* Appends a line for each group whose record changed, in one write(2). A
 * process killed during it leaves all of the lines, none, or (when they
 * cross a page of the file: the kernel copies page by page and stops at a
 * fatal signal) the first ones and a last line cut short; a power loss
 * leaves a prefix too. chat_state_open skips a last line cut short, and
 * every whole line is a record of something shown: the file never says
 * more than was shown, and no ack went out for this write. Rewrites the
 * file instead when the file was removed or replaced under us, or the
 * lines do not fit one write. */
static chat_client_err append(chat_state *st, char *why, size_t why_size)
{
    char buf[8192];
    size_t len = 0;
    ssize_t n;
    struct stat sb;

    for (size_t i = 0; i < st->n; i++) {
        int k;
        if (!st->ent[i].changed)
            continue;
        k = snprintf(buf + len, sizeof buf - len, "%llu %s\n", (unsigned long long)st->ent[i].shown,
                     st->ent[i].group);
        if (k < 0 || (size_t)k >= sizeof buf - len)
            return save(st, why, why_size);
        len += (size_t)k;
    }
    if (fstat(st->log_fd, &sb) != 0 || sb.st_nlink == 0)
        return save(st, why, why_size);
    n = write(st->log_fd, buf, len);
    if (n < 0 || (size_t)n != len) {
        /* A line cut short must not stay before the next one: rewrite. */
        close(st->log_fd);
        st->log_fd = -1;
        return save(st, why, why_size);
    }
    for (size_t i = 0; i < st->n; i++)
        st->ent[i].changed = false;
    st->dirty = false;
    st->log_bytes += len;
    return CHAT_CLIENT_OK;
}

chat_client_err chat_state_set(chat_state *st, const char *group, uint64_t shown, char *why,
                               size_t why_size)
{
    struct state_entry *e = find(st, group);

    if (e == NULL) {
        if ((e = add(st, group, shown)) == NULL) {
            snprintf(why, why_size, "out of memory");
            return CHAT_CLIENT_ERR_NOMEM;
        }
        e->changed = true;
        st->dirty = true;
    }
    if (e->shown != shown) {
        e->shown = shown;
        e->changed = true;
        st->dirty = true;
    }
    return CHAT_CLIENT_OK;
}

bool chat_state_dirty(const chat_state *st)
{
    return st->dirty;
}

chat_client_err chat_state_flush(chat_state *st, char *why, size_t why_size)
{
    if (!st->dirty)
        return CHAT_CLIENT_OK;
    if (st->log_fd < 0 || st->log_bytes >= LOG_MAX)
        return save(st, why, why_size);
    return append(st, why, why_size);
}

const char *chat_state_incarnation(const chat_state *st)
{
    return st->incarnation;
}

chat_client_err chat_state_set_incarnation(chat_state *st, const char *incarnation, char *why,
                                           size_t why_size)
{
    if (strlen(incarnation) >= sizeof st->incarnation ||
        strspn(incarnation, "0123456789abcdef") != strlen(incarnation)) {
        snprintf(why, why_size, "bad incarnation from the server");
        return CHAT_CLIENT_ERR_STATE;
    }
    if (strcmp(st->incarnation, incarnation) == 0)
        return CHAT_CLIENT_OK;
    snprintf(st->incarnation, sizeof st->incarnation, "%s", incarnation);
    return save(st, why, why_size);
}
