/* push_url: the normal form of a push URL, the operator's prefixes, and
 * the addresses the sender may connect to (see push_url.h). */
#include "push_url.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* Whether host (as libcurl gives it: IPv6 in brackets) is a literal
 * loopback address. */
static bool literal_loopback(const char *host)
{
    struct in_addr a4;
    if (!strcmp(host, "[::1]")) {
        return true;
    }
    return inet_pton(AF_INET, host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

static bool host_chars_ok(const char *host)
{
    size_t n = strlen(host);
    if (n == 0) {
        return false;
    }
    if (host[0] == '[') {
        /* an IPv6 literal; a zone (%) is refused */
        for (size_t i = 1; i + 1 < n; i++) {
            if (!isxdigit((unsigned char)host[i]) && host[i] != ':' && host[i] != '.') {
                return false;
            }
        }
        return host[n - 1] == ']';
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)host[i];
        if (!islower(c) && !isdigit(c) && c != '-' && c != '.') {
            return false;
        }
    }
    return true;
}

/* Encoded dots, slashes and backslashes in a path: a server that decodes
 * them before it routes would leave an allowed prefix ("/up/%2e%2e/x"); so
 * would one that decodes twice ("%252e", an encoded percent) or drops a
 * segment's parameters before it resolves dot segments ("/up/..;/x", as
 * Tomcat and Jetty do). */
static bool path_ok(const char *path)
{
    for (const char *p = strchr(path, '%'); p; p = strchr(p + 1, '%')) {
        if (!strncasecmp(p, "%2e", 3) || !strncasecmp(p, "%2f", 3) || !strncasecmp(p, "%5c", 3) ||
            !strncasecmp(p, "%25", 3)) {
            return false;
        }
    }
    for (const char *seg = strchr(path, '/'); seg; seg = strchr(seg + 1, '/')) {
        if (!strncmp(seg, "/.;", 3) || !strncmp(seg, "/..;", 4)) {
            return false;
        }
    }
    return path[0] == '/';
}

const char *push_url_normalize(const char *url, char *out, bool *loopback)
{
    CURLU *u = NULL;
    char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *query = NULL, *frag = NULL;
    char *zone = NULL;
    const char *why = NULL;
    size_t n = strlen(url);

    *loopback = false;
    if (n == 0 || n > PUSH_URL_MAX) {
        return "a URL of 1 to 1000 bytes is needed";
    }
    for (size_t i = 0; i < n; i++) {
        if (url[i] <= 0x20 || url[i] >= 0x7f || url[i] == '\\') {
            return "the URL must be printable ASCII without spaces or backslashes (the host in "
                   "punycode, the path percent-encoded)";
        }
    }
    u = curl_url();
    if (!u) {
        return "out of memory";
    }
    if (curl_url_set(u, CURLUPART_URL, url, CURLU_DISALLOW_USER) != CURLUE_OK) {
        why = "not a URL (or one with a user name or password)";
        goto done;
    }
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        (strcmp(scheme, "https") != 0 && strcmp(scheme, "http") != 0)) {
        why = "the URL must be https (or http to a loopback address)";
        goto done;
    }
    if (curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0) == CURLUE_OK) {
        why = "the URL must not have a fragment";
        goto done;
    }
    if (curl_url_get(u, CURLUPART_ZONEID, &zone, 0) == CURLUE_OK) {
        why = "the URL's host must be a name in punycode or an IP address";
        goto done;
    }
    if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        why = "the URL has no host";
        goto done;
    }
    for (char *h = host; *h; h++) {
        *h = (char)tolower((unsigned char)*h);
    }
    if (!host_chars_ok(host)) {
        why = "the URL's host must be a name in punycode or an IP address";
        goto done;
    }
    *loopback = literal_loopback(host);
    if (!strcmp(scheme, "http") && !*loopback) {
        why = "the URL must be https (http only to a loopback address)";
        goto done;
    }
    if (curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK || !path_ok(path)) {
        why = "the URL's path must not hold encoded dots, slashes or backslashes";
        goto done;
    }
    CURLUcode qrc = curl_url_get(u, CURLUPART_QUERY, &query, 0);
    if (qrc != CURLUE_OK && qrc != CURLUE_NO_QUERY) {
        why = "not a URL";
        goto done;
    }
    if (curl_url_get(u, CURLUPART_PORT, &port, 0) == CURLUE_OK &&
        ((!strcmp(scheme, "https") && !strcmp(port, "443")) ||
         (!strcmp(scheme, "http") && !strcmp(port, "80")))) {
        curl_free(port);
        port = NULL;
    }
    int len = snprintf(out, PUSH_URL_MAX + 1, "%s://%s%s%s%s%s%s", scheme, host, port ? ":" : "",
                       port ? port : "", path, query ? "?" : "", query ? query : "");
    if (len < 0 || len > PUSH_URL_MAX) {
        why = "a URL of 1 to 1000 bytes is needed";
    }

done:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_free(query);
    curl_free(frag);
    curl_free(zone);
    curl_url_cleanup(u);
    return why;
}

bool push_url_allowed(char *const *allow, const char *url)
{
    for (char *const *p = allow; p && *p; p++) {
        if (!strncmp(url, *p, strlen(*p))) {
            return true;
        }
    }
    return false;
}

bool push_url_addr_ok(const struct sockaddr *sa, bool loopback_ok)
{
    if (sa->sa_family == AF_INET) {
        uint32_t a = ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr);
        unsigned top = a >> 24;
        if (top == 127) {
            return loopback_ok;
        }
        /* 0.0.0.0/8 (this host), 169.254/16 (link-local: cloud metadata),
         * 224/4 and above (multicast, reserved) */
        return top != 0 && (a >> 16) != 0xa9fe && top < 224;
    }
    if (sa->sa_family == AF_INET6) {
        const uint8_t *b = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (!memcmp(b, mapped, sizeof(mapped))) {
            struct sockaddr_in v4 = {.sin_family = AF_INET};
            memcpy(&v4.sin_addr, b + 12, 4);
            return push_url_addr_ok((const struct sockaddr *)&v4, loopback_ok);
        }
        bool zero = true;
        for (int i = 0; i < 15; i++) {
            zero = zero && b[i] == 0;
        }
        if (zero && b[15] == 1) {
            return loopback_ok; /* ::1 */
        }
        /* An IPv4 address inside: ::a.b.c.d (IPv4-compatible, deprecated)
         * and 64:ff9b::a.b.c.d (NAT64, RFC 6052), which a translator takes
         * to a.b.c.d: the rules of that address. */
        static const uint8_t compat[12] = {0};
        static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
        if ((!memcmp(b, compat, sizeof(compat)) && !zero) || !memcmp(b, nat64, sizeof(nat64))) {
            struct sockaddr_in v4 = {.sin_family = AF_INET};
            memcpy(&v4.sin_addr, b + 12, 4);
            return push_url_addr_ok((const struct sockaddr *)&v4, loopback_ok);
        }
        /* :: (unspecified), fe80::/10 (link-local), ff00::/8 (multicast) */
        return !(zero && b[15] == 0) && !(b[0] == 0xfe && (b[1] & 0xc0) == 0x80) && b[0] != 0xff;
    }
    return false;
}
