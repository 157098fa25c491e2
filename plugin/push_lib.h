/* push_lib: libcurl, loaded with dlopen when push notifications are
 * configured, not linked: Debian's libcurl4 pulls in GnuTLS (through
 * librtmp), Kerberos, LDAP and p11-kit, and a broker whose operator never
 * turns push on needs none of them mapped (p11-kit's exit-time destructor
 * also deadlocks in a broker that preloads the plugin, as the sanitizer
 * builds do). The rest of the plugin calls libcurl's functions by their
 * own names (curl/curl.h declares them); push_lib.c defines each one,
 * calling the library's through the pointer dlsym found, loading it at the
 * first call. Until it is loaded, or when it cannot be, every function
 * fails as libcurl does when out of memory (NULL, CURLE_FAILED_INIT,
 * CURLUE_OUT_OF_MEMORY, CURLM_OUT_OF_MEMORY).
 *
 * Threading: the load runs once (pthread_once) on whichever thread calls
 * first; the functions then are libcurl's, with its rules. */
#ifndef CHAT_PUSH_LIB_H
#define CHAT_PUSH_LIB_H

#include <stdbool.h>

/* Loads libcurl once; false with a static reason in *why when it cannot
 * (libcurl4 missing, or one without a function used here). */
bool push_lib_load(const char **why);

#endif
