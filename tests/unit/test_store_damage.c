/* Unit tests of reading a damaged store (leveldb/ldb_db): a bad block fails the
 * reads that touch it, not the writes.
 * One table of named cases, each on a fresh store (store_fixture.h). */
#include "store_fixture.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Finds needle in buf; NULL when absent. */
static char *find_bytes(char *buf, size_t len, const char *needle)
{
    size_t n = strlen(needle);

    for (size_t i = 0; n <= len && i <= len - n; i++)
        if (memcmp(buf + i, needle, n) == 0)
            return buf + i;
    return NULL;
}

/* Inverts the bytes of the first occurrence of needle in one of dir's table
 * files (*.ldb), as a bad disk block would; true when one was found. */
static bool damage_table(const char *dir, const char *needle)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    bool done = false;

    assert_non_null(d);
    while (!done && (de = readdir(d)) != NULL) {
        size_t nl = strlen(de->d_name);
        char path[512];
        char *buf, *hit;
        FILE *f;
        long len;

        if (nl < 5 || strcmp(de->d_name + nl - 4, ".ldb") != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        f = fopen(path, "r+b");
        assert_non_null(f);
        assert_int_equal(fseek(f, 0, SEEK_END), 0);
        len = ftell(f);
        assert_true(len > 0);
        buf = malloc((size_t)len);
        assert_non_null(buf);
        rewind(f);
        assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
        hit = find_bytes(buf, (size_t)len, needle);
        if (hit) {
            for (size_t i = 0; i < strlen(needle); i++)
                hit[i] = (char)~hit[i];
            assert_int_equal(fseek(f, hit - buf, SEEK_SET), 0);
            assert_int_equal(fwrite(hit, 1, strlen(needle), f), strlen(needle));
            done = true;
        }
        free(buf);
        assert_int_equal(fclose(f), 0);
    }
    closedir(d);
    return done;
}

static void assert_error_names(chat_store *st, const char *a, const char *b)
{
    const char *e = chat_store_last_error(st);

    assert_non_null(e);
    if (!strstr(e, a) || (b && !strstr(e, b)))
        fail_msg("last error \"%s\" does not name %s %s", e, a, b ? b : "");
}

static void test_i7_bad_block_fails_reads_not_writes(void **state)
{
    struct fixture *fx = *state;
    chat_page *page = NULL;
    chat_msg msg = {0};
    bool found = true;
    char env[NOISE_LEN];
    chat_err rc;

    assert_string_equal(chat_store_last_error(fx->st), "");
    noise_fill(fx->st, "bad", 60);
    noise_fill(fx->st, "good", 60);
    /* into table files, where a bad block can be: the log is read once */
    ASSERT_OK(chat_store_compact(fx->st));
    chat_store_close(fx->st);
    fx->st = NULL;
    assert_true(damage_table(fx->dir, "<bad#30>"));
    reopen(fx, CHAT_SYNC_NONE);

    /* the damaged message: an error naming it, not its garbled bytes */
    rc = chat_store_get(fx->st, "bad", 30, &msg, &found);
    assert_true(rc == CHAT_ECORRUPT || rc == CHAT_EIO);
    assert_false(found);
    assert_error_names(fx->st, "\"bad\"", "30");
    /* a page over it fails whole, naming where it started */
    rc = chat_store_read_forward(fx->st, "bad", 0, 100, SIZE_MAX, &page);
    assert_true(rc == CHAT_ECORRUPT || rc == CHAT_EIO);
    assert_null(page);
    assert_error_names(fx->st, "\"bad\"", "after 0");

    /* the other group reads whole */
    ASSERT_OK(chat_store_read_forward(fx->st, "good", 0, 100, SIZE_MAX, &page));
    assert_int_equal(page->count, 60);
    for (size_t i = 0; i < 60; i++) {
        assert_int_equal(page->msgs[i].len, noise_make(env, "good", i + 1));
        assert_memory_equal(page->msgs[i].data, env, NOISE_LEN);
    }
    chat_page_destroy(page);

    /* and writes go on, to the other group and to the damaged one */
    assert_int_equal(append_parts(fx->st, "good", "u", "c", "g", 1, "@", 1, NULL, 0, NULL), 61);
    assert_int_equal(append_parts(fx->st, "bad", "u", "c", "b", 1, "@", 1, NULL, 0, NULL), 61);
    assert_int_equal(append_parts(fx->st, "fresh", "u", NULL, "f", 1, "@", 1, NULL, 0, NULL), 1);
    ASSERT_OK(chat_store_member_add(fx->st, "bad", "alice", NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "bad", "alice", "d1", 61, NULL));
    ASSERT_OK(chat_store_sync(fx->st));
    ASSERT_OK(chat_store_read_forward(fx->st, "bad", 60, 10, SIZE_MAX, &page));
    assert_int_equal(page->count, 1);
    assert_int_equal(page->msgs[0].id, 61);
    assert_string_equal(page->msgs[0].data, "b61@7");
    chat_page_destroy(page);
    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "bad", 61);
    assert_head(fx->st, "good", 61);
    assert_head(fx->st, "fresh", 1);
    assert_cursor(fx->st, "bad", "alice", "d1", true, 61);
}

/* ------------------------------------------------------------------------
 * Table
 * --------------------------------------------------------------------- */

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_i7_bad_block_fails_reads_not_writes),
    };

    return cmocka_run_group_tests_name("store_damage", tests, NULL, NULL);
}
