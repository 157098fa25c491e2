/* pg_schema: the PostgreSQL backend's tables and functions (the SQL text),
 * created on first use, and the statements the backend prepares on each
 * connection: one per op, each one round trip. Private to store/pg.
 *
 * Adding an op: a function in SCHEMA_SQL (pg_schema.c) that does the op's
 * whole work in one call, a PG_STMT_* below and its line in pg_statements,
 * and a C wrapper that passes the parameters and reads the row(s).
 */
#ifndef PG_SCHEMA_H
#define PG_SCHEMA_H

#include <stddef.h>

/* The version of the schema this code creates and expects, kept in
 * chat_meta('schema'). */
#define PG_SCHEMA_VERSION "1"

/* The notification channels: a stored message (payload origin/id/group)
 * and a membership change (payload: the group). */
#define PG_CHANNEL_MSG "chat_msg"
#define PG_CHANNEL_INVAL "chat_inval"

enum pg_stmt {
    PG_STMT_HEAD = 0,
    PG_STMT_FIRST,
    PG_STMT_APPEND,
    PG_STMT_CID_FIND,
    PG_STMT_GET,
    PG_STMT_SCAN_FWD,
    PG_STMT_SCAN_BACK,
    PG_STMT_TRIM,
    PG_STMT_GROUPS,
    PG_STMT_CURSOR_INFO,
    PG_STMT_CURSOR_ADVANCE,
    PG_STMT_CURSOR_MAX,
    PG_STMT_CURSOR_START,
    PG_STMT_CURSOR_TOUCH,
    PG_STMT_EXPIRE,
    PG_STMT_MEMBER_ADD,
    PG_STMT_MEMBER_GET,
    PG_STMT_MEMBER_REMOVE,
    PG_STMT_MEMBER_GROUPS,
    PG_STMT_GROUP_DELETE,
    PG_STMT_STATS,
    PG_STMT_GROUP_MEMBERS,
    PG_STMT_MEMBER_DEVICES,
    PG_STMT_DELETIONS,
    PG_STMT_GROUP_INIT,
    PG_STMT_CHECK,
    PG_STMT_FOLLOW_HEAD,
    PG_STMT_FOLLOW_FETCH,
    PG_STMT_MEMBER_COUNT,
    PG_STMT_READ_ADVANCE,
    PG_STMT_READ_GET,
    PG_STMT_READS,
    PG_STMT_CHANGE,
    PG_STMT_CID_OF,
    PG_STMT_PUSH_PUT,
    PG_STMT_PUSH_GET,
    PG_STMT_PUSH_REMOVE,
    PG_STMT_PUSH_LIST,
    PG_STMT_PUSH_MEMBERS,
    PG_STMT_PUSH_EXPIRE,
    PG_STMT_PAGE,
    PG_STMT_CURSOR_OPEN,
    PG_STMT_MEMBER_JOIN,
    PG_STMT_COUNT
};

/* A prepared statement: its name on the connection, its text, and how many
 * parameters it takes (all sent as text). */
struct pg_statement {
    const char *name;
    const char *sql;
    int nparams;
};

extern const struct pg_statement pg_statements[PG_STMT_COUNT];

/* The most parameters a statement takes (pg_run's arrays). */
#define PG_PARAMS_MAX 16

/* The whole schema: tables, indexes and functions, idempotent (IF NOT
 * EXISTS, CREATE OR REPLACE), run in one transaction under an advisory
 * lock so that brokers starting together do not race. */
extern const char *const pg_schema_sql[]; /* parts, NULL-terminated: run them as one text */

#endif
