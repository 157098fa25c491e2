/* standalone.c: runs a fuzz target without libFuzzer, once over every file
 * named on the command line or found in a directory named there (sorted):
 * the seed corpus and the saved crashes as regression tests, in any build
 * and under any compiler. A failed check aborts, as under libFuzzer. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 4096;
            uint8_t *n = realloc(buf, cap);
            if (!n) {
                fclose(f);
                free(buf);
                return 1;
            }
            buf = n;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            break;
        }
    }
    fclose(f);
    /* A copy of exactly len bytes, so that reading past it is caught. */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        return 1;
    }
    if (len) {
        memcpy(exact, buf, len);
    }
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
    unsigned runs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            continue; /* no saved crashes: fine */
        }
        if (!S_ISDIR(sb.st_mode)) {
            runs++;
            if (run_file(argv[i])) {
                return 1;
            }
            continue;
        }
        struct dirent **names = NULL;
        int n = scandir(argv[i], &names, NULL, by_name);
        for (int k = 0; k < n; k++) {
            char path[4096];
            if (names[k]->d_name[0] != '.') {
                snprintf(path, sizeof(path), "%s/%s", argv[i], names[k]->d_name);
                runs++;
                if (run_file(path)) {
                    return 1;
                }
            }
            free(names[k]);
        }
        free(names);
    }
    printf("%s: %u inputs run\n", argv[0], runs);
    return runs > 0 ? 0 : 1; /* a corpus that is not there is an error */
}
