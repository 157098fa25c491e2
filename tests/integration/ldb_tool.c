/* ldb_tool: a test helper that works on a stopped broker's store with
 * LevelDB itself, for integ_damage: what a newer mosquitto-chat, or an
 * operator's repair, would do to it.
 *
 *   ldb_tool format <db> <n>         writes the store's format record: version n
 *   ldb_tool expect-format <db> <n>  exits 0 if the format record is version n
 *   ldb_tool expect-missing <db> <name>
 *                                    exits 0 if the meta record '#<name>' is absent
 *   ldb_tool repair <db>             LevelDB's RepairDB (with paranoid checks:
 *                                    without them a block that fails its checksum
 *                                    but parses is kept as it is)
 *
 * Until the offline tool of issue 12 (mqchat-store repair) is on main, the
 * repair path of the integration tests runs through this helper. Exits 0 on
 * success, 1 with a message on stderr otherwise.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <leveldb/c.h>

#define FORMAT_KEY "#format"

static leveldb_t *open_db(const char *path, leveldb_options_t *opt)
{
    char *err = NULL;
    leveldb_t *db = leveldb_open(opt, path, &err);
    if (err) {
        fprintf(stderr, "ldb_tool: cannot open %s: %s\n", path, err);
        leveldb_free(err);
        exit(1);
    }
    return db;
}

/* The raw value of key (len bytes, leveldb_free), NULL when absent. */
static char *get(const char *path, const char *key, size_t *len)
{
    leveldb_options_t *opt = leveldb_options_create();
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    leveldb_t *db = open_db(path, opt);
    char *err = NULL;
    char *v = leveldb_get(db, ro, key, strlen(key), len, &err);
    if (err) {
        fprintf(stderr, "ldb_tool: cannot read %s: %s\n", key, err);
        exit(1);
    }
    leveldb_close(db);
    leveldb_readoptions_destroy(ro);
    leveldb_options_destroy(opt);
    return v;
}

static int set_format(const char *path, uint64_t version)
{
    leveldb_options_t *opt = leveldb_options_create();
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    leveldb_t *db = open_db(path, opt);
    char v[8], *err = NULL;
    for (int i = 7; i >= 0; i--, version >>= 8)
        v[i] = (char)(version & 0xff);
    leveldb_writeoptions_set_sync(wo, 1);
    leveldb_put(db, wo, FORMAT_KEY, strlen(FORMAT_KEY), v, sizeof v, &err);
    leveldb_close(db);
    leveldb_writeoptions_destroy(wo);
    leveldb_options_destroy(opt);
    if (err) {
        fprintf(stderr, "ldb_tool: cannot write the format record: %s\n", err);
        return 1;
    }
    return 0;
}

static int expect_format(const char *path, uint64_t want)
{
    size_t len = 0;
    char *v = get(path, FORMAT_KEY, &len);
    uint64_t got = 0;
    if (v == NULL || len != 8) {
        fprintf(stderr, "ldb_tool: format record %s\n", v ? "of a wrong size" : "missing");
        leveldb_free(v);
        return 1;
    }
    for (size_t i = 0; i < 8; i++)
        got = got << 8 | (unsigned char)v[i];
    leveldb_free(v);
    if (got != want) {
        fprintf(stderr, "ldb_tool: format version %llu, expected %llu\n", (unsigned long long)got,
                (unsigned long long)want);
        return 1;
    }
    return 0;
}

static int expect_missing(const char *path, const char *name)
{
    char key[256];
    size_t len = 0;
    char *v;
    snprintf(key, sizeof key, "#%s", name);
    v = get(path, key, &len);
    if (v != NULL) {
        fprintf(stderr, "ldb_tool: %s is there (%zu bytes)\n", key, len);
        leveldb_free(v);
        return 1;
    }
    return 0;
}

static int repair(const char *path)
{
    leveldb_options_t *opt = leveldb_options_create();
    char *err = NULL;
    leveldb_options_set_paranoid_checks(opt, 1);
    leveldb_options_set_compression(opt, leveldb_snappy_compression);
    leveldb_repair_db(opt, path, &err);
    leveldb_options_destroy(opt);
    if (err) {
        fprintf(stderr, "ldb_tool: RepairDB %s: %s\n", path, err);
        leveldb_free(err);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "format") == 0)
        return set_format(argv[2], strtoull(argv[3], NULL, 10));
    if (argc == 4 && strcmp(argv[1], "expect-format") == 0)
        return expect_format(argv[2], strtoull(argv[3], NULL, 10));
    if (argc == 4 && strcmp(argv[1], "expect-missing") == 0)
        return expect_missing(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "repair") == 0)
        return repair(argv[2]);
    fprintf(stderr, "usage: ldb_tool format|expect-format <db> <n> | expect-missing <db> <name> | "
                    "repair <db>\n");
    return 2;
}
