/* store_fixture: what every unit test of store/ shares: a fresh LevelDB
 * directory per case (setup and teardown for cmocka), the test envelopes
 * and the checks of what the store holds. Helpers fail the running case
 * with cmocka's assertions; every page and message they get is freed, since
 * valgrind runs over these tests too.
 */
#ifndef STORE_FIXTURE_H
#define STORE_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>

#include "chat_store.h"

struct fixture {
    char dir[64];   /* the test's private LevelDB directory */
    chat_store *st; /* open on dir, or NULL after a failed reopen */
};

/* Fails the running case with the code's text when expr is not CHAT_OK. */
#define ASSERT_OK(expr)                                                                            \
    do {                                                                                           \
        chat_err rc_ = (expr);                                                                     \
        if (rc_ != CHAT_OK)                                                                        \
            fail_msg("%s returned %d (%s)", #expr, (int)rc_, chat_strerror(rc_));                  \
    } while (0)

/* Removes path and everything below it; symlinks are removed, not followed.
 * Best effort: teardown must not fail because a file is already gone. */
void rm_tree(const char *path);

/* cmocka's setup and teardown of a case: *state becomes a struct fixture
 * with a store open (CHAT_SYNC_NONE) on a new directory under /tmp, which
 * teardown closes and removes. */
int setup(void **state);
int teardown(void **state);

/* Closes the fixture's store and opens the same directory again. */
void reopen(struct fixture *fx, chat_sync sync);

/* The time every envelope of a fixture's store gets: setup and reopen set
 * the store's clock to it (a case that sets its own clock changes it). */
#define FIXTURE_TS 7

/* Room for a test envelope and its NUL. */
#define ENV_CAP 256

/* Writes the test envelope of (group, id) to buf and returns its length:
 * "group#id@7" (the id and FIXTURE_TS, as the store fills them in) when
 * size is 0, else exactly size bytes, that text padded with '.' (size may
 * not be less). buf gets a NUL after them. */
size_t env_make(char *buf, const char *group, uint64_t id, size_t size);

/* Appends the template (head, id, mid, ts, tail) and returns the id the
 * store gave it; *duplicate (NULL: must not be one) receives whether the
 * store found the cid stored already. */
uint64_t append_parts(chat_store *st, const char *group, const char *from, const char *cid,
                      const char *head, size_t head_len, const char *mid, size_t mid_len,
                      const char *tail, size_t tail_len, bool *duplicate);

/* Appends the test envelope of the group's next id; returns that id. */
uint64_t append_env(chat_store *st, const char *group, const char *from, const char *cid,
                    size_t size);

/* Appends n natural-size envelopes to group. */
void fill(chat_store *st, const char *group, unsigned n);

/* Checks a page holds exactly the messages ids[0..count) of group, each with
 * the envelope env_make wrote for it (sizes NULL: natural size), a NUL after
 * the bytes, bytes equal to their sum, and the given more flag. */
void check_page_ids(const chat_page *page, const char *group, const uint64_t *ids,
                    const size_t *sizes, size_t count, bool more);

/* check_page_ids for a run of count natural-size ids from first, ascending
 * (step 1) or descending (step -1). */
void check_page_run(const chat_page *page, const char *group, uint64_t first, int step,
                    size_t count, bool more);

/* Checks of what the store answers (a head, a cursor, a membership, a cid,
 * a message that must not be there): each fails the case when it differs. */
void assert_head(chat_store *st, const char *group, uint64_t want);

void assert_cursor(chat_store *st, const char *group, const char *member, const char *device,
                   bool want_found, uint64_t want);

void assert_member(chat_store *st, const char *group, const char *member, bool want_found,
                   uint64_t want_joined);

void assert_cid(chat_store *st, const char *group, const char *from, const char *cid,
                bool want_found, uint64_t want);

void assert_not_stored(chat_store *st, const char *group, uint64_t id);

/* Collects what chat_store_member_groups reports; stops after stop_after
 * calls when that is not 0. */
#define WALK_MAX 16
struct walk {
    char names[WALK_MAX][32];
    uint64_t joined[WALK_MAX];
    int calls;
    int stop_after;
};

int collect_group(void *ctx, const char *group, uint64_t joined);

/* Bytes of a noise envelope. */
#define NOISE_LEN 1000

/* Writes an envelope of NOISE_LEN bytes for (group, id): a marker
 * "<group#id>7" (the id and FIXTURE_TS) then pseudo-random printable bytes, which snappy leaves as
 * literals, so the marker can be found in a table file. */
size_t noise_make(char *buf, const char *group, uint64_t id);

void noise_fill(chat_store *st, const char *group, uint64_t n);

/* A raw key prefix: a tag, then length-prefixed parts (NULL ends them). */
size_t raw_prefix(char *buf, size_t cap, char tag, const char *a, const char *b);

/* Counts the keys starting with prefix in the fixture's store: closes it,
 * reads the directory with LevelDB itself, and opens the store again. */
size_t raw_count(struct fixture *fx, const char *prefix, size_t plen);

/* Keys of one kind in group (and of member, when not NULL). */
size_t group_keys(struct fixture *fx, char tag, const char *group, const char *member);

/* A name one byte longer than CHAT_STORE_MAX_NAME: static, NUL-terminated. */
const char *too_long_name(void);

/* A case of the table: one test with the fixture around it. */
/* Closes the fixture's store, puts (v not NULL) or deletes the raw key k with
 * LevelDB itself, and opens the store again: a record as an older version,
 * or damage, would have left it. */
void raw_write(struct fixture *fx, const char *k, size_t klen, const void *v, size_t vlen);

#define CASE(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* What the operations' walks report (members, devices, groups): up to 8
 * names (each fails the case beyond), with the number each came with
 * (joined, acked, head) and a device's last use. */
struct names {
    char name[8][32];
    uint64_t num[8];
    int64_t used[8];
    int n;
};

int collect_member(void *ctx, const char *member, uint64_t joined);
int collect_device(void *ctx, const char *device, uint64_t acked, int64_t used);
int collect_name(void *ctx, const char *group, uint64_t head);

/* What chat_store_check reports: how many problems, the last one, and all
 * of them ("group: problem" lines, as many as fit). */
struct problems {
    int n;
    char last[512];
    char all[2048];
};

void collect_problem(void *ctx, const char *group, const char *problem);

/* Waits (at most seconds) for the store's job to end; returns its state. */
chat_job_state wait_job(chat_store *st, int seconds);

#endif
