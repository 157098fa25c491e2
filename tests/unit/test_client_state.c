/* test_client_state.c: unit tests (cmocka) of clients/state.c, the client
 * library's state file: appended lines between rewrites, read back with the
 * last line of a group winning, a last line cut short skipped, and a file
 * removed under the library written anew. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "state.h"

static char g_dir[64];
static char g_path[128];

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/test-client-state-XXXXXX");
    if (mkdtemp(g_dir) == NULL)
        return -1;
    snprintf(g_path, sizeof g_path, "%s/s.state", g_dir);
    return 0;
}

static int teardown(void **state)
{
    char p[160];

    (void)state;
    unlink(g_path);
    snprintf(p, sizeof p, "%s.lock", g_path);
    unlink(p);
    snprintf(p, sizeof p, "%s.tmp", g_path);
    unlink(p);
    rmdir(g_dir);
    return 0;
}

/* The whole file as a string (free it). */
static char *slurp(void)
{
    FILE *f = fopen(g_path, "r");
    char *text = calloc(1, 4096);
    size_t n;

    assert_non_null(f);
    assert_non_null(text);
    n = fread(text, 1, 4095, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

static void spit(const char *text)
{
    FILE *f = fopen(g_path, "w");

    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static uint64_t shown_of(const chat_state *st, const char *group)
{
    for (size_t i = 0; i < chat_state_count(st); i++) {
        uint64_t shown;
        if (strcmp(chat_state_group(st, i, &shown), group) == 0)
            return shown;
    }
    return UINT64_MAX;
}

static chat_state *open_state(void)
{
    char why[256];
    chat_state *st = NULL;

    assert_int_equal(chat_state_open(g_path, &st, why, sizeof why), CHAT_CLIENT_OK);
    return st;
}

static void set_flush(chat_state *st, const char *group, uint64_t id)
{
    char why[256];

    assert_int_equal(chat_state_set(st, group, id, why, sizeof why), CHAT_CLIENT_OK);
    assert_int_equal(chat_state_flush(st, why, sizeof why), CHAT_CLIENT_OK);
    assert_false(chat_state_dirty(st));
}

/* Flushes after the first append lines; close leaves one line a group. */
static void test_append_then_close(void **state)
{
    chat_state *st;
    char *text;

    (void)state;
    st = open_state();
    set_flush(st, "a", 5); /* the first flush rewrites */
    set_flush(st, "a", 7);
    set_flush(st, "b", 3);
    text = slurp();
    assert_non_null(strstr(text, "\n5 a\n7 a\n3 b\n"));
    free(text);
    chat_state_close(st);
    text = slurp();
    assert_null(strstr(text, "5 a"));
    assert_non_null(strstr(text, "\n7 a\n3 b\n"));
    free(text);
    st = open_state();
    assert_true(shown_of(st, "a") == 7);
    assert_true(shown_of(st, "b") == 3);
    chat_state_close(st);
}

/* A file left with appended lines (a kill -9): the last line of each group
 * counts; a last line cut short (a power loss) is skipped. */
static void test_read_appended(void **state)
{
    chat_state *st;
    char why[256];

    (void)state;
    spit("# header\n5 a\n7 b\n9 a\n12 b");
    st = open_state();
    assert_int_equal(chat_state_count(st), 2);
    assert_true(shown_of(st, "a") == 9);
    assert_true(shown_of(st, "b") == 7);
    chat_state_close(st);
    /* A line cut short anywhere else is still an error. */
    spit("# header\n5 a\n7\n9 a\n");
    st = NULL;
    assert_int_equal(chat_state_open(g_path, &st, why, sizeof why), CHAT_CLIENT_ERR_STATE);
    assert_null(st);
}

/* The file removed while the state is open: the next flush writes it anew
 * rather than append to the removed one. */
static void test_removed_under_us(void **state)
{
    chat_state *st;
    char *text;

    (void)state;
    st = open_state();
    set_flush(st, "a", 1);
    set_flush(st, "a", 2);
    assert_int_equal(unlink(g_path), 0);
    set_flush(st, "a", 3);
    text = slurp();
    assert_non_null(strstr(text, "\n3 a\n"));
    free(text);
    chat_state_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_append_then_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_appended, setup, teardown),
        cmocka_unit_test_setup_teardown(test_removed_under_us, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
