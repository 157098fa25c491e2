/* push_url: what makes a URL one the plugin may post to. Endpoints are
 * chosen by clients, so every one is reduced to one normal form before it
 * is compared with the operator's push_allow prefixes or used, and the
 * address a name resolves to is checked again when the sender connects
 * (DNS may answer differently then than at registration: rebinding).
 *
 * The rules, each a refusal with a reason:
 *   - at most PUSH_URL_MAX bytes of printable ASCII (a host in punycode,
 *     a path percent-encoded), no backslash;
 *   - scheme http or https, a host, no user or password, no fragment, no
 *     IPv6 zone, no encoded dot, slash, backslash or percent in the path,
 *     no ".;" or "..;" segment (a server that decodes them, or drops a
 *     segment's parameters, would walk out of an allowed path prefix);
 *   - http only to a literal loopback address (127.0.0.0/8, [::1]): only
 *     a test's server or a gateway on the broker's own machine is reached
 *     without TLS, and no name can stand for loopback;
 *   - for push_allow, the normal form must start with one of the
 *     operator's prefixes, themselves in normal form: scheme and host in
 *     lower case, no default port, a path of at least "/", dot segments
 *     resolved. So "https://push.example/" allows
 *     "https://Push.Example:443/up?x" and not "https://push.example.evil/".
 * At connect time (push_url_addr_ok) a name that resolves to a loopback,
 * link-local (cloud metadata), unspecified or multicast address is
 * refused, also inside an IPv6 address that carries an IPv4 one
 * (IPv4-mapped, IPv4-compatible, NAT64); private networks stay allowed (a push server of the
 * operator's own on the LAN), since push_allow already names the host.
 *
 * Threading: none; push_url_addr_ok runs on the sender thread, the rest on
 * the broker's. Uses libcurl's URL parser (curl_url), which needs no global
 * initialisation.
 */
#ifndef CHAT_PUSH_URL_H
#define CHAT_PUSH_URL_H

#include <stdbool.h>
#include <stddef.h>

struct sockaddr;

#define PUSH_URL_MAX 1000 /* bytes: UnifiedPush's bound on an endpoint */

/* Writes the normal form of url into out (PUSH_URL_MAX + 1 bytes) and
 * whether its host is a literal loopback address into *loopback. Returns
 * NULL, or a static reason to refuse it (out then undefined). http to
 * anything but loopback is refused here. */
const char *push_url_normalize(const char *url, char *out, bool *loopback);

/* Whether the normal form url starts with one of the prefixes of allow
 * (NULL-terminated, each in normal form). */
bool push_url_allowed(char *const *allow, const char *url);

/* Whether the sender may connect to sa: false for a loopback address
 * unless loopback_ok (the URL named a loopback address itself), and for
 * link-local, unspecified and multicast addresses always. */
bool push_url_addr_ok(const struct sockaddr *sa, bool loopback_ok);

#endif
