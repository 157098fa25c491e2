/* fuzz.h: what the fuzz targets of fuzz/ share. Each target is one
 * LLVMFuzzerTestOneInput over a parser of client input, run by libFuzzer
 * (CHAT_FUZZ, clang) or, in the normal build, by standalone.c over the seed
 * corpus and the regression inputs, once each.
 *
 * A target checks what must hold and calls FUZZ_CHECK, which aborts with
 * the reason: libFuzzer then keeps the input as a crash.
 */
#ifndef CHAT_FUZZ_H
#define CHAT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "plugin_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The plugin on a store in a temporary directory, made at the first call
 * with options opts (NULL-terminated "key=value") and removed at exit;
 * the same for every input of the run. Aborts when it cannot be made. */
struct plugin_fixture *fuzz_fixture(const char *const *opts);

/* A new store (and plugin) in place of the fixture's, with the same
 * options: a store that only grows slows LevelDB's writes down (its
 * compactions fall behind), so targets that write renew it now and then. */
void fuzz_fixture_renew(void);

/* Forgets the per client state between inputs (answer budgets, pending
 * subscriptions, catch-ups), so that one input's answers do not depend on
 * how many came before it; the store keeps what the inputs wrote. */
void fuzz_fixture_fresh(struct plugin_fixture *fx);

/* Checks every publish recorded since the last call, then forgets them: all
 * to client_id alone, not retained, each a {"responses":[...]} of strict
 * JSON whose entries name their command; the last (the answer) on
 * answer_topic (NULL: the response topic) with Correlation Data
 * corr[0..corr_len) (NULL: none), those before it (replay pages the
 * request started) on the response topic without. Returns how
 * many there were. */
size_t fuzz_check_answers(const char *client_id, const char *answer_topic, const void *corr,
                          size_t corr_len);

#endif
