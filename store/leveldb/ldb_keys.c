/* ldb_keys: resume points, and a key's description for error messages
 * (see ldb_keys.h). */
#include "ldb_keys.h"
#include "store_text.h"

void ldb_describe_key(const char *k, size_t len, char *out, size_t cap)
{
    const char *p = k + 1, *end = k + len, *a = NULL, *b = NULL, *c = NULL;
    size_t an = 0, bn = 0, cn = 0;
    out[0] = '\0';
    if (len == 0) {
        store_put_text(out, cap, "(empty key)");
        return;
    }
    switch (k[0]) {
    case TAG_HEAD:
    case TAG_FIRST:
    case TAG_DELETE:
    case TAG_COUNT:
        if (next_part(&p, end, &a, &an)) {
            store_put_text(out, cap, "%s of group ",
                           k[0] == TAG_HEAD    ? "head"
                           : k[0] == TAG_FIRST ? "first id"
                           : k[0] == TAG_COUNT ? "member count"
                                               : "deletion");
            store_put_name(out, cap, "", a, an);
            return;
        }
        break;
    case TAG_MSG:
    case TAG_CIDREV:
        if (next_part(&p, end, &a, &an) && end - p == 8) {
            store_put_text(out, cap, "%s %llu of group ",
                           k[0] == TAG_MSG ? "message" : "cid of message",
                           (unsigned long long)get_u64(p));
            store_put_name(out, cap, "", a, an);
            return;
        }
        break;
    case TAG_CURSOR:
    case TAG_JOIN:
    case TAG_MAX:
        if (next_part(&p, end, &a, &an) && next_part(&p, end, &b, &bn)) {
            store_put_text(out, cap, "%s of member ",
                           k[0] == TAG_JOIN  ? "membership"
                           : k[0] == TAG_MAX ? "max cursor"
                                             : "cursor");
            store_put_name(out, cap, "", b, bn);
            if (k[0] == TAG_CURSOR && next_part(&p, end, &c, &cn)) {
                store_put_name(out, cap, " device ", c, cn);
            }
            store_put_name(out, cap, " in group ", a, an);
            return;
        }
        break;
    case TAG_PUSH:
        if (next_part(&p, end, &a, &an) && next_part(&p, end, &b, &bn)) {
            store_put_name(out, cap, "push registration of member ", a, an);
            store_put_name(out, cap, " device ", b, bn);
            return;
        }
        break;
    case TAG_READ:
        if (next_part(&p, end, &a, &an)) {
            store_put_name(out, cap, "read marker of member ", p, (size_t)(end - p));
            store_put_name(out, cap, " in group ", a, an);
            return;
        }
        break;
    case TAG_GROUPS:
        if (next_part(&p, end, &a, &an)) {
            store_put_name(out, cap, "group index of member ", a, an);
            store_put_name(out, cap, " for group ", p, (size_t)(end - p));
            return;
        }
        break;
    case TAG_CID:
        if (next_part(&p, end, &a, &an) && next_part(&p, end, &b, &bn) &&
            next_part(&p, end, &c, &cn)) {
            store_put_name(out, cap, "cid ", c, cn);
            store_put_name(out, cap, " of ", b, bn);
            store_put_name(out, cap, " in group ", a, an);
            return;
        }
        break;
    case TAG_META:
        store_put_name(out, cap, "store record ", k + 1, len - 1);
        return;
    default:
        break;
    }
    store_put_text(out, cap, "record '%c' of %zu bytes", k[0] >= 0x20 && k[0] < 0x7f ? k[0] : '?',
                   len);
}

bool ldb_resume_get(const char *resume, char tag, key *start, bool *after)
{
    size_t rlen = ((size_t)(unsigned char)resume[0] << 8) | (unsigned char)resume[1];
    if (rlen > sizeof(start->buf) || (rlen > 0 && resume[2] != tag)) {
        return false;
    }
    key_init(start, tag);
    if (rlen > 0) {
        memcpy(start->buf, resume + 2, rlen);
        start->len = rlen;
    }
    *after = rlen > 0;
    return true;
}

void ldb_resume_put(char *resume, const key *last)
{
    size_t n = last ? last->len : 0;
    resume[0] = (char)(n >> 8);
    resume[1] = (char)(n & 0xff);
    if (n > 0) {
        memcpy(resume + 2, last->buf, n);
    }
}
