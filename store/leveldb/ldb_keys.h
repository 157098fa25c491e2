/* ldb_keys: the LevelDB backend's key layout (ldb_store.c's design note)
 * and its encoding: a tag byte, length-prefixed strings and 8-byte
 * big-endian integers, so that byte order is id order and a seek plus a
 * forward scan reads a page. Private to store/leveldb.
 *
 * The encoders are inline: they run several times on every publish and
 * every delivery. A key too long for its buffer (a part over MAX_PART) sets
 * `overflow` instead of writing, and every caller answers CHAT_EINVAL.
 */
#ifndef LDB_KEYS_H
#define LDB_KEYS_H

#include "chat_store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TAG_HEAD 'H'
#define TAG_FIRST 'F'
#define TAG_MSG 'M'
#define TAG_CURSOR 'C'
#define TAG_JOIN 'J'
#define TAG_GROUPS 'G'
#define TAG_CID 'I'
#define TAG_CIDREV 'K'
#define TAG_MAX 'X'
#define TAG_DELETE 'D'
#define TAG_READ 'R'  /* read marker of a member, its name bare: name order */
#define TAG_COUNT 'N' /* the number of members of a group */
#define TAG_PUSH 'P'  /* a device's push registration */

#define TAG_META '#'

/* The 'D' record: generation (8), bound (8), then the resume key. */
#define DELETE_HEADER 16u

/* Meta records: '#' and a name. */
#define META_DELETE_GEN "deletions"    /* the last group deletion's generation */
#define META_RUNNING "running"         /* sync mode (1), boot id: a run under way */
#define META_INCARNATION "incarnation" /* 32 hex digits */
#define META_GROUPS "groups"           /* the number of 'H' records (groups) */
#define META_FORMAT "format"           /* the key layout's version (8) */

/* The version of the key layout this code writes and reads. A store from
 * before the '#format' record is version 1; a layout that older code would
 * misread takes the next number, and older code then refuses the store.
 * Version 2: 'H' is no longer written with every message but is a floor of
 * the head (invariant dense-ids); code of version 1 would take it for
 * the head and give ids again. Version 2 reads version 1 stores as they are
 * and marks them 2 at open. */
#define LDB_FORMAT 2u
#define META_RECEIPTS "receipts" /* 'R' and 'N' records are kept */

/* Longest key component (group, member, device, cid) accepted. Group names
 * stop at 128 bytes and cids at 64; client ids and usernames may in theory
 * reach 65535 bytes, which no chat needs, so they are refused here. */
#define MAX_PART CHAT_STORE_MAX_NAME

/* A key under construction. Keys are short (a few hundred bytes at most), so
 * one fixed buffer avoids an allocation per lookup on the broker's thread. */
typedef struct key {
    char buf[4 * (MAX_PART + 2) + 16]; /* four parts and an id */
    size_t len;
    bool overflow;
} key;

/* A resume point of chat_store_expire_devices and chat_store_push_expire
 * is a key and its length (ldb_resume_get, ldb_resume_put). */
_Static_assert(CHAT_STORE_RESUME_MAX >= 2 + sizeof(((key *)0)->buf), "resume point too small");

static inline void put_u64(char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (char)(v & 0xff);
        v >>= 8;
    }
}

static inline uint64_t get_u64(const char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = (v << 8) | (unsigned char)p[i];
    }
    return v;
}

static inline void key_init(key *k, char tag)
{
    k->buf[0] = tag;
    k->len = 1;
    k->overflow = false;
}

/* Appends n bytes of s with their length in front. */
static inline void key_part(key *k, const char *s, size_t n)
{
    if (n > MAX_PART || k->len + 2 + n > sizeof(k->buf)) {
        k->overflow = true;
        return;
    }
    k->buf[k->len++] = (char)((n >> 8) & 0xff);
    k->buf[k->len++] = (char)(n & 0xff);
    memcpy(k->buf + k->len, s, n);
    k->len += n;
}

static inline void key_str(key *k, const char *s)
{
    key_part(k, s, strlen(s));
}

/* Appends s without a length: only for a key's last part, which then sorts
 * in plain byte order. */
static inline void key_raw(key *k, const char *s)
{
    size_t n = strlen(s);
    if (n > MAX_PART || k->len + n > sizeof(k->buf)) {
        k->overflow = true;
        return;
    }
    memcpy(k->buf + k->len, s, n);
    k->len += n;
}

static inline void key_u64(key *k, uint64_t v)
{
    if (k->len + 8 > sizeof(k->buf)) {
        k->overflow = true;
        return;
    }
    put_u64(k->buf + k->len, v);
    k->len += 8;
}

/* Takes the next length-prefixed part of a key; false when none is left. */
static inline bool next_part(const char **p, const char *end, const char **s, size_t *n)
{
    if (end - *p < 2) {
        return false;
    }
    size_t len = ((size_t)(unsigned char)(*p)[0] << 8) | (unsigned char)(*p)[1];
    if ((size_t)(end - *p - 2) < len) {
        return false;
    }
    *s = *p + 2;
    *n = len;
    *p += 2 + len;
    return true;
}

/* tag g: a group's record of one kind ('H', 'F', 'D'), or the prefix of a
 * group's records of one kind. */
static inline void group_key(key *k, char tag, const char *group)
{
    key_init(k, tag);
    key_str(k, group);
}

/* tag g id: a group's record of one id ('M', 'K'); *prefix, when not
 * NULL, receives tag g, the prefix of every id's. */
static inline void id_key(key *k, key *prefix, char tag, const char *group, uint64_t id)
{
    group_key(k, tag, group);
    if (prefix) {
        *prefix = *k;
    }
    key_u64(k, id);
}

/* '#' name: a meta record. */
static inline void meta_key(key *k, const char *name)
{
    key_init(k, TAG_META);
    key_raw(k, name);
}

static inline void cursor_key(key *k, const char *group, const char *member, const char *device)
{
    key_init(k, TAG_CURSOR);
    key_str(k, group);
    key_str(k, member);
    if (device) {
        key_str(k, device);
    }
}

static inline void max_key(key *k, const char *group, const char *member)
{
    key_init(k, TAG_MAX);
    key_str(k, group);
    key_str(k, member);
}

static inline void join_keys(key *kj, key *kg, const char *group, const char *member)
{
    key_init(kj, TAG_JOIN);
    key_str(kj, group);
    key_str(kj, member);
    key_init(kg, TAG_GROUPS);
    key_str(kg, member);
    key_raw(kg, group);
}

/* 'R' g m: member m's read marker in group g, the name bare (the key's
 * last part) so that a group's members come out in byte order of their
 * names. */
static inline void read_key(key *k, const char *group, const char *member)
{
    key_init(k, TAG_READ);
    key_str(k, group);
    key_raw(k, member);
}

/* 'P' m d: the push registration of device d of member m; without d,
 * the prefix of every registration of m. */
static inline void push_key(key *k, const char *member, const char *device)
{
    key_init(k, TAG_PUSH);
    key_str(k, member);
    if (device) {
        key_str(k, device);
    }
}

/* A message's cid index entry ('I' group from cid -> id) and its reverse
 * ('K' group id -> the value kv, from and cid), as an append writes them
 * (invariant deletable-keys): whoever deletes the message finds the entry by id.
 * Returns false when one of them overflows (a name too long for a key). */
static inline bool cid_key(key *ki, const char *group, const char *from, const char *cid)
{
    group_key(ki, TAG_CID, group);
    key_str(ki, from);
    key_str(ki, cid);
    return !ki->overflow;
}

/* The reverse entry of a cid: its key and its value. */
static inline bool cid_rev_keys(key *kk, key *kv, const char *group, const char *from,
                                const char *cid, uint64_t id)
{
    id_key(kk, NULL, TAG_CIDREV, group, id);
    kv->len = 0;
    kv->overflow = false;
    key_str(kv, from);
    key_str(kv, cid);
    return !kk->overflow && !kv->overflow;
}

static inline bool cid_keys(key *ki, key *kk, key *kv, const char *group, const char *from,
                            const char *cid, uint64_t id)
{
    bool ok = cid_key(ki, group, from, cid);
    return cid_rev_keys(kk, kv, group, from, cid, id) && ok;
}

/* Reads a step's resume point: its key's big-endian length in two bytes,
 * then the last key the step before looked at; length 0 starts at the
 * first of tag's records. Sets *start to that key (tag alone when empty)
 * and *after to whether the step goes on after it. False when resume is
 * not a resume point of tag's records. */
bool ldb_resume_get(const char *resume, char tag, key *start, bool *after);

/* Writes the resume point of a step that looked at last (NULL: the walk
 * is done and the next one starts at the first record). resume holds
 * CHAT_STORE_RESUME_MAX bytes. */
void ldb_resume_put(char *resume, const key *last);

/* Writes a reader's description of a key (the record kind, its group,
 * member, device, cid and id) to out: error messages name the keys whose
 * reading or writing failed, so that an operator knows what is damaged. */
void ldb_describe_key(const char *k, size_t len, char *out, size_t cap);

#endif
