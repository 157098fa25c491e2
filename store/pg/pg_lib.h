/* pg_lib: libpq, loaded with dlopen when the first PostgreSQL store opens,
 * not linked: a broker on LevelDB never maps libpq and what it pulls in
 * (GnuTLS, Kerberos, LDAP, p11-kit). One of those, p11-kit, deadlocks in
 * its exit-time destructor when it is loaded with a preloaded plugin (as
 * the sanitizer builds load it), and a plugin's users on LevelDB need none
 * of them. Private to store/pg: the rest of pg/ calls libpq's functions by
 * their own names, which pg_lib.c defines. */
#ifndef PG_LIB_H
#define PG_LIB_H

#include <libpq-fe.h>
#include <stdbool.h>

/* Loads libpq once (thread-safe); false with a static reason in *why when
 * it cannot (libpq5 missing, or a libpq without a function used here). */
bool pg_lib_load(const char **why);

#endif
