/* pg_lib: libpq, loaded when the first PostgreSQL store opens (see
 * pg_lib.h). Each function below has libpq's own prototype (libpq-fe.h
 * checks it) and calls the library's through the pointer dlsym found. */
#include "pg_lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* The library's functions, found once. */
static struct {
    void (*PQclear)(PGresult *res);
    PGconn *(*PQconnectdbParams)(const char *const *keywords, const char *const *values,
                                 int expand_dbname);
    int (*PQconsumeInput)(PGconn *conn);
    char *(*PQerrorMessage)(const PGconn *conn);
    PGresult *(*PQexec)(PGconn *conn, const char *query);
    void (*PQfinish)(PGconn *conn);
    void (*PQfreemem)(void *ptr);
    PGresult *(*PQgetResult)(PGconn *conn);
    int (*PQgetisnull)(const PGresult *res, int tup_num, int field_num);
    int (*PQgetlength)(const PGresult *res, int tup_num, int field_num);
    char *(*PQgetvalue)(const PGresult *res, int tup_num, int field_num);
    int (*PQisBusy)(PGconn *conn);
    PGnotify *(*PQnotifies)(PGconn *conn);
    int (*PQntuples)(const PGresult *res);
    PGresult *(*PQprepare)(PGconn *conn, const char *stmtName, const char *query, int nParams,
                           const Oid *paramTypes);
    int (*PQsendQueryParams)(PGconn *conn, const char *command, int nParams, const Oid *paramTypes,
                             const char *const *paramValues, const int *paramLengths,
                             const int *paramFormats, int resultFormat);
    PGcancel *(*PQgetCancel)(PGconn *conn);
    int (*PQcancel)(PGcancel *cancel, char *errbuf, int errbufsize);
    void (*PQfreeCancel)(PGcancel *cancel);
    char *(*PQresultErrorField)(const PGresult *res, int fieldcode);
    char *(*PQresultErrorMessage)(const PGresult *res);
    ExecStatusType (*PQresultStatus)(const PGresult *res);
    int (*PQsendQueryPrepared)(PGconn *conn, const char *stmtName, int nParams,
                               const char *const *paramValues, const int *paramLengths,
                               const int *paramFormats, int resultFormat);
    int (*PQsocket)(const PGconn *conn);
    ConnStatusType (*PQstatus)(const PGconn *conn);
    int (*PQbackendPID)(const PGconn *conn);
    const char *(*PQparameterStatus)(const PGconn *conn, const char *paramName);
    PGPing (*PQpingParams)(const char *const *keywords, const char *const *values,
                           int expand_dbname);
} lib;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool loaded;
static char load_error[256] = "libpq not loaded";

/* dlsym returns a void *; the cast to a function pointer goes through
 * memcpy, which ISO C allows. */
static bool find(void *h, const char *name, void *slot, size_t size)
{
    void *p = dlsym(h, name);
    if (!p) {
        snprintf(load_error, sizeof(load_error), "libpq has no %s", name);
        return false;
    }
    memcpy(slot, &p, size);
    return true;
}

static void load(void)
{
    /* Never closed: its symbols must stay for the process's life, as the
     * plugin itself does (-z nodelete). */
    void *h = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(load_error, sizeof(load_error), "cannot load libpq.so.5 (Debian: libpq5): %s",
                 dlerror());
        return;
    }
    bool ok = true;
    ok = ok && find(h, "PQclear", &lib.PQclear, sizeof(lib.PQclear));
    ok = ok && find(h, "PQconnectdbParams", &lib.PQconnectdbParams, sizeof(lib.PQconnectdbParams));
    ok = ok && find(h, "PQconsumeInput", &lib.PQconsumeInput, sizeof(lib.PQconsumeInput));
    ok = ok && find(h, "PQerrorMessage", &lib.PQerrorMessage, sizeof(lib.PQerrorMessage));
    ok = ok && find(h, "PQexec", &lib.PQexec, sizeof(lib.PQexec));
    ok = ok && find(h, "PQfinish", &lib.PQfinish, sizeof(lib.PQfinish));
    ok = ok && find(h, "PQfreemem", &lib.PQfreemem, sizeof(lib.PQfreemem));
    ok = ok && find(h, "PQgetResult", &lib.PQgetResult, sizeof(lib.PQgetResult));
    ok = ok && find(h, "PQgetisnull", &lib.PQgetisnull, sizeof(lib.PQgetisnull));
    ok = ok && find(h, "PQgetlength", &lib.PQgetlength, sizeof(lib.PQgetlength));
    ok = ok && find(h, "PQgetvalue", &lib.PQgetvalue, sizeof(lib.PQgetvalue));
    ok = ok && find(h, "PQisBusy", &lib.PQisBusy, sizeof(lib.PQisBusy));
    ok = ok && find(h, "PQnotifies", &lib.PQnotifies, sizeof(lib.PQnotifies));
    ok = ok && find(h, "PQntuples", &lib.PQntuples, sizeof(lib.PQntuples));
    ok = ok && find(h, "PQprepare", &lib.PQprepare, sizeof(lib.PQprepare));
    ok = ok && find(h, "PQsendQueryParams", &lib.PQsendQueryParams, sizeof(lib.PQsendQueryParams));
    ok = ok && find(h, "PQgetCancel", &lib.PQgetCancel, sizeof(lib.PQgetCancel));
    ok = ok && find(h, "PQcancel", &lib.PQcancel, sizeof(lib.PQcancel));
    ok = ok && find(h, "PQfreeCancel", &lib.PQfreeCancel, sizeof(lib.PQfreeCancel));
    ok = ok &&
         find(h, "PQresultErrorField", &lib.PQresultErrorField, sizeof(lib.PQresultErrorField));
    ok = ok && find(h, "PQresultErrorMessage", &lib.PQresultErrorMessage,
                    sizeof(lib.PQresultErrorMessage));
    ok = ok && find(h, "PQresultStatus", &lib.PQresultStatus, sizeof(lib.PQresultStatus));
    ok = ok &&
         find(h, "PQsendQueryPrepared", &lib.PQsendQueryPrepared, sizeof(lib.PQsendQueryPrepared));
    ok = ok && find(h, "PQsocket", &lib.PQsocket, sizeof(lib.PQsocket));
    ok = ok && find(h, "PQbackendPID", &lib.PQbackendPID, sizeof(lib.PQbackendPID));
    ok = ok && find(h, "PQstatus", &lib.PQstatus, sizeof(lib.PQstatus));
    ok = ok && find(h, "PQparameterStatus", &lib.PQparameterStatus, sizeof(lib.PQparameterStatus));
    ok = ok && find(h, "PQpingParams", &lib.PQpingParams, sizeof(lib.PQpingParams));
    loaded = ok;
}

bool pg_lib_load(const char **why)
{
    pthread_once(&once, load);
    *why = load_error;
    return loaded;
}

void PQclear(PGresult *res)
{
    lib.PQclear(res);
}

PGconn *PQconnectdbParams(const char *const *keywords, const char *const *values, int expand_dbname)
{
    return lib.PQconnectdbParams(keywords, values, expand_dbname);
}

int PQconsumeInput(PGconn *conn)
{
    return lib.PQconsumeInput(conn);
}

char *PQerrorMessage(const PGconn *conn)
{
    return lib.PQerrorMessage(conn);
}

PGresult *PQexec(PGconn *conn, const char *query)
{
    return lib.PQexec(conn, query);
}

void PQfinish(PGconn *conn)
{
    lib.PQfinish(conn);
}

void PQfreemem(void *ptr)
{
    lib.PQfreemem(ptr);
}

PGresult *PQgetResult(PGconn *conn)
{
    return lib.PQgetResult(conn);
}

int PQgetisnull(const PGresult *res, int tup_num, int field_num)
{
    return lib.PQgetisnull(res, tup_num, field_num);
}

int PQgetlength(const PGresult *res, int tup_num, int field_num)
{
    return lib.PQgetlength(res, tup_num, field_num);
}

char *PQgetvalue(const PGresult *res, int tup_num, int field_num)
{
    return lib.PQgetvalue(res, tup_num, field_num);
}

int PQisBusy(PGconn *conn)
{
    return lib.PQisBusy(conn);
}

PGnotify *PQnotifies(PGconn *conn)
{
    return lib.PQnotifies(conn);
}

int PQntuples(const PGresult *res)
{
    return lib.PQntuples(res);
}

PGresult *PQprepare(PGconn *conn, const char *stmtName, const char *query, int nParams,
                    const Oid *paramTypes)
{
    return lib.PQprepare(conn, stmtName, query, nParams, paramTypes);
}

int PQsendQueryParams(PGconn *conn, const char *command, int nParams, const Oid *paramTypes,
                      const char *const *paramValues, const int *paramLengths,
                      const int *paramFormats, int resultFormat)
{
    return lib.PQsendQueryParams(conn, command, nParams, paramTypes, paramValues, paramLengths,
                                 paramFormats, resultFormat);
}

PGcancel *PQgetCancel(PGconn *conn)
{
    return lib.PQgetCancel(conn);
}

int PQcancel(PGcancel *cancel, char *errbuf, int errbufsize)
{
    return lib.PQcancel(cancel, errbuf, errbufsize);
}

void PQfreeCancel(PGcancel *cancel)
{
    lib.PQfreeCancel(cancel);
}

char *PQresultErrorField(const PGresult *res, int fieldcode)
{
    return lib.PQresultErrorField(res, fieldcode);
}

char *PQresultErrorMessage(const PGresult *res)
{
    return lib.PQresultErrorMessage(res);
}

ExecStatusType PQresultStatus(const PGresult *res)
{
    return lib.PQresultStatus(res);
}

int PQsendQueryPrepared(PGconn *conn, const char *stmtName, int nParams,
                        const char *const *paramValues, const int *paramLengths,
                        const int *paramFormats, int resultFormat)
{
    return lib.PQsendQueryPrepared(conn, stmtName, nParams, paramValues, paramLengths, paramFormats,
                                   resultFormat);
}

int PQsocket(const PGconn *conn)
{
    return lib.PQsocket(conn);
}

int PQbackendPID(const PGconn *conn)
{
    return lib.PQbackendPID(conn);
}

ConnStatusType PQstatus(const PGconn *conn)
{
    return lib.PQstatus(conn);
}

const char *PQparameterStatus(const PGconn *conn, const char *paramName)
{
    return lib.PQparameterStatus(conn, paramName);
}

PGPing PQpingParams(const char *const *keywords, const char *const *values, int expand_dbname)
{
    return lib.PQpingParams(keywords, values, expand_dbname);
}
