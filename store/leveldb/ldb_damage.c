/* ldb_damage: the checks an open makes for a damaged store (see
 * ldb_damage.h). */
#include "ldb_damage.h"
#include "store_text.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* How many table files the size check looks at, at most: far more than a
 * store of terabytes has (LevelDB's tables are about 2 MiB). */
#define MAX_TABLES 10000000u

/* Whether name is one of LevelDB's numbered data files: a table
 * (NNNNNN.ldb, or .sst from older LevelDB) or a write-ahead log
 * (NNNNNN.log). */
static bool data_file(const char *name)
{
    size_t n = 0;
    while (isdigit((unsigned char)name[n])) {
        n++;
    }
    return n > 0 &&
           (!strcmp(name + n, ".ldb") || !strcmp(name + n, ".sst") || !strcmp(name + n, ".log"));
}

chat_err ldb_damage_before_open(const char *path, char **errmsg)
{
    char current[PATH_MAX_LEN + 16], found[256] = "";
    struct stat sb;
    struct dirent *de;
    DIR *d;

    store_set_text(current, sizeof(current), "%s/CURRENT", path);
    if (stat(current, &sb) == 0 || errno != ENOENT) {
        return CHAT_OK; /* there, or LevelDB will say why it cannot read it */
    }
    d = opendir(path);
    if (!d) {
        return CHAT_OK;
    }
    while (!found[0] && (de = readdir(d)) != NULL) {
        if (data_file(de->d_name)) {
            store_set_text(found, sizeof(found), "%s", de->d_name);
        }
    }
    closedir(d);
    if (!found[0]) {
        return CHAT_OK; /* a new store, or one that never held data */
    }
    char why[PATH_MAX_LEN + 400];
    store_set_text(why, sizeof(why),
                   "%s is missing, but the store's data files are there (%s ...): opening it "
                   "would start an empty store and delete them",
                   current, found);
    store_open_error(errmsg, "damaged store", why);
    return CHAT_ECORRUPT;
}

/* Compares one table file's size with what the manifest recorded; the
 * file may have gone since the listing (a compaction deleted it). */
static chat_err check_table_size(const ldb *st, unsigned long long number, unsigned long long size,
                                 char **errmsg)
{
    static const char *const exts[] = {"ldb", "sst"};
    char file[PATH_MAX_LEN + 32], why[PATH_MAX_LEN + 128];
    struct stat sb;

    for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
        store_set_text(file, sizeof(file), "%s/%06llu.%s", st->path, number, exts[i]);
        if (stat(file, &sb) != 0) {
            continue;
        }
        if ((unsigned long long)sb.st_size >= size) {
            return CHAT_OK;
        }
        store_set_text(why, sizeof(why),
                       "table file %s is truncated: %lld bytes, where the store's manifest "
                       "records %llu",
                       file, (long long)sb.st_size, size);
        store_open_error(errmsg, "damaged store", why);
        return CHAT_ECORRUPT;
    }
    return CHAT_OK;
}

/* The manifest's size of every live table file, from the property
 * "leveldb.sstables": a line per level ("--- level N ---") and one per
 * table, " <number>:<size>[<smallest key> .. <largest key>]". Keys are
 * printed with every byte outside ' '..'~' escaped, so a line break only
 * ever ends a line. A line of another shape is skipped: LevelDB does not
 * promise the format, and then this check does less, never wrongly. */
static chat_err check_table_sizes(ldb *st, char **errmsg)
{
    char *list = leveldb_property_value(st->db, "leveldb.sstables");
    chat_err rc = CHAT_OK;
    const char *p = list;
    size_t tables = 0;

    while (p && *p && rc == CHAT_OK && tables < MAX_TABLES) {
        const char *eol = strchr(p, '\n');
        unsigned long long number, size;
        char *end;
        if (p[0] == ' ' && isdigit((unsigned char)p[1])) {
            number = strtoull(p + 1, &end, 10);
            if (*end == ':' && isdigit((unsigned char)end[1])) {
                size = strtoull(end + 1, &end, 10);
                if (*end == '[') {
                    rc = check_table_size(st, number, size, errmsg);
                    tables++;
                }
            }
        }
        p = eol ? eol + 1 : NULL;
    }
    leveldb_free(list);
    return rc;
}

/* Reads every record; the iterator verifies each block's checksum, skips a
 * block that fails and keeps the error, which ends the walk here. */
static chat_err read_everything(ldb *st, char **errmsg)
{
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    leveldb_iterator_t *it;
    char *err = NULL;
    chat_err rc = CHAT_OK;
    key last; /* about 4 KiB */

    leveldb_readoptions_set_verify_checksums(ro, 1);
    /* A read of everything once must not push out what the broker reads. */
    leveldb_readoptions_set_fill_cache(ro, 0);
    it = leveldb_create_iterator(st->db, ro);
    leveldb_iter_seek_to_first(it);
    /* The last good key, to say where the damage is: LevelDB's text does
     * not always name the file. */
    last.len = 0;
    while (!(err = iter_error(it)) && leveldb_iter_valid(it)) {
        size_t klen = 0;
        const char *k = leveldb_iter_key(it, &klen);
        last.len = klen < sizeof(last.buf) ? klen : sizeof(last.buf);
        memcpy(last.buf, k, last.len);
        leveldb_iter_next(it);
    }
    if (err) {
        bool corrupt = strncmp(err, "Corruption", 10) == 0;
        char where[CHAT_STORE_ERROR_MAX] = "", why[CHAT_STORE_ERROR_MAX + 64];
        if (last.len > 0) {
            ldb_describe_key(last.buf, last.len, where, sizeof(where));
        }
        store_set_text(why, sizeof(why), "%s (in a table file, %s%s)", err,
                       last.len > 0 ? "after the " : "before the first record", where);
        store_open_error(errmsg, corrupt ? "damaged store" : "cannot read the store", why);
        leveldb_free(err);
        rc = corrupt ? CHAT_ECORRUPT : CHAT_EIO;
    }
    leveldb_iter_destroy(it);
    leveldb_readoptions_destroy(ro);
    return rc;
}

chat_err ldb_damage_check(ldb *st, bool verify, char **errmsg)
{
    chat_err rc = check_table_sizes(st, errmsg);
    if (rc == CHAT_OK && verify) {
        rc = read_everything(st, errmsg);
    }
    return rc;
}
