/* push_lib: libcurl, loaded at the first call (see push_lib.h). Each
 * function below has libcurl's own prototype (curl/curl.h checks it) and
 * calls the library's through the pointer dlsym found; the two variadic
 * ones pass their one argument on by the type its option says. */
#define CURL_DISABLE_TYPECHECK /* the real functions are defined here */
#include "push_lib.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The library's functions, found once. */
static struct {
    CURLcode (*curl_easy_setopt)(CURL *curl, CURLoption option, ...);
    CURLcode (*curl_easy_getinfo)(CURL *curl, CURLINFO info, ...);
    CURLcode (*curl_global_init)(long flags);
    void (*curl_global_cleanup)(void);
    CURL *(*curl_easy_init)(void);
    void (*curl_easy_cleanup)(CURL *curl);
    const char *(*curl_easy_strerror)(CURLcode code);
    void (*curl_free)(void *p);
    time_t (*curl_getdate)(const char *p, const time_t *unused);
    CURLM *(*curl_multi_init)(void);
    CURLMcode (*curl_multi_cleanup)(CURLM *multi_handle);
    CURLMcode (*curl_multi_add_handle)(CURLM *multi_handle, CURL *curl_handle);
    CURLMcode (*curl_multi_remove_handle)(CURLM *multi_handle, CURL *curl_handle);
    CURLMcode (*curl_multi_perform)(CURLM *multi_handle, int *running_handles);
    CURLMcode (*curl_multi_poll)(CURLM *multi_handle, struct curl_waitfd extra_fds[],
                                 unsigned int extra_nfds, int timeout_ms, int *ret);
    CURLMcode (*curl_multi_wakeup)(CURLM *multi_handle);
    CURLMsg *(*curl_multi_info_read)(CURLM *multi_handle, int *msgs_in_queue);
    struct curl_slist *(*curl_slist_append)(struct curl_slist *list, const char *data);
    void (*curl_slist_free_all)(struct curl_slist *list);
    CURLU *(*curl_url)(void);
    void (*curl_url_cleanup)(CURLU *handle);
    CURLUcode (*curl_url_set)(CURLU *handle, CURLUPart what, const char *part, unsigned int flags);
    CURLUcode (*curl_url_get)(CURLU *handle, CURLUPart what, char **part, unsigned int flags);
} lib;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool loaded;
static char load_error[256] = "libcurl not loaded";

/* dlsym returns a void *; the cast to a function pointer goes through
 * memcpy, which ISO C allows. */
static bool find(void *h, const char *name, void *slot, size_t size)
{
    void *p = dlsym(h, name);
    if (!p) {
        snprintf(load_error, sizeof(load_error), "libcurl has no %s", name);
        return false;
    }
    memcpy(slot, &p, size);
    return true;
}

#define FIND(name) (ok = ok && find(h, #name, &lib.name, sizeof(lib.name)))

static void load(void)
{
    /* Never closed: its symbols must stay for the process's life, as the
     * plugin itself does (-z nodelete). */
    void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    bool ok = h != NULL;
    if (!h) {
        snprintf(load_error, sizeof(load_error), "cannot load libcurl.so.4 (Debian: libcurl4): %s",
                 dlerror());
        return;
    }
    FIND(curl_easy_setopt);
    FIND(curl_easy_getinfo);
    FIND(curl_global_init);
    FIND(curl_global_cleanup);
    FIND(curl_easy_init);
    FIND(curl_easy_cleanup);
    FIND(curl_easy_strerror);
    FIND(curl_free);
    FIND(curl_getdate);
    FIND(curl_multi_init);
    FIND(curl_multi_cleanup);
    FIND(curl_multi_add_handle);
    FIND(curl_multi_remove_handle);
    FIND(curl_multi_perform);
    FIND(curl_multi_poll);
    FIND(curl_multi_wakeup);
    FIND(curl_multi_info_read);
    FIND(curl_slist_append);
    FIND(curl_slist_free_all);
    FIND(curl_url);
    FIND(curl_url_cleanup);
    FIND(curl_url_set);
    FIND(curl_url_get);
    loaded = ok;
}

bool push_lib_load(const char **why)
{
    pthread_once(&once, load);
    *why = load_error;
    return loaded;
}

static bool ready(void)
{
    pthread_once(&once, load);
    return loaded;
}

/* The argument of an option, by its type, taken from ap and passed on. */
static CURLcode set_long(CURL *curl, CURLoption option, va_list *ap)
{
    return lib.curl_easy_setopt(curl, option, va_arg(*ap, long));
}

static CURLcode set_pointer(CURL *curl, CURLoption option, va_list *ap)
{
    return lib.curl_easy_setopt(curl, option, va_arg(*ap, void *));
}

static CURLcode set_function(CURL *curl, CURLoption option, va_list *ap)
{
    return lib.curl_easy_setopt(curl, option, va_arg(*ap, void (*)(void)));
}

static CURLcode set_off(CURL *curl, CURLoption option, va_list *ap)
{
    return lib.curl_easy_setopt(curl, option, va_arg(*ap, curl_off_t));
}

CURLcode curl_easy_setopt(CURL *curl, CURLoption option, ...)
{
    va_list ap;
    CURLcode rc = CURLE_FAILED_INIT;
    if (!ready()) {
        return rc;
    }
    va_start(ap, option);
    /* An option's number says the type of its argument (curl.h, CURLOPT):
     * longs, then pointers (objects, strings, lists), functions, curl_off_t,
     * and blobs (pointers). */
    if (option < CURLOPTTYPE_OBJECTPOINT) {
        rc = set_long(curl, option, &ap);
    } else if (option >= CURLOPTTYPE_FUNCTIONPOINT && option < CURLOPTTYPE_OFF_T) {
        rc = set_function(curl, option, &ap);
    } else if (option >= CURLOPTTYPE_OFF_T && option < CURLOPTTYPE_BLOB) {
        rc = set_off(curl, option, &ap);
    } else {
        rc = set_pointer(curl, option, &ap);
    }
    va_end(ap);
    return rc;
}

CURLcode curl_easy_getinfo(CURL *curl, CURLINFO info, ...)
{
    va_list ap;
    CURLcode rc = CURLE_FAILED_INIT;
    if (!ready()) {
        return rc;
    }
    va_start(ap, info);
    rc = lib.curl_easy_getinfo(curl, info, va_arg(ap, void *));
    va_end(ap);
    return rc;
}

CURLcode curl_global_init(long flags)
{
    return ready() ? lib.curl_global_init(flags) : CURLE_FAILED_INIT;
}

void curl_global_cleanup(void)
{
    if (ready()) {
        lib.curl_global_cleanup();
    }
}

CURL *curl_easy_init(void)
{
    return ready() ? lib.curl_easy_init() : NULL;
}

void curl_easy_cleanup(CURL *curl)
{
    if (ready()) {
        lib.curl_easy_cleanup(curl);
    }
}

const char *curl_easy_strerror(CURLcode code)
{
    return ready() ? lib.curl_easy_strerror(code) : "libcurl not loaded";
}

void curl_free(void *p)
{
    if (ready()) {
        lib.curl_free(p);
    }
}

time_t curl_getdate(const char *p, const time_t *unused)
{
    return ready() ? lib.curl_getdate(p, unused) : (time_t)-1;
}

CURLM *curl_multi_init(void)
{
    return ready() ? lib.curl_multi_init() : NULL;
}

CURLMcode curl_multi_cleanup(CURLM *multi_handle)
{
    return ready() ? lib.curl_multi_cleanup(multi_handle) : CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_add_handle(CURLM *multi_handle, CURL *curl_handle)
{
    return ready() ? lib.curl_multi_add_handle(multi_handle, curl_handle) : CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_remove_handle(CURLM *multi_handle, CURL *curl_handle)
{
    return ready() ? lib.curl_multi_remove_handle(multi_handle, curl_handle) : CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_perform(CURLM *multi_handle, int *running_handles)
{
    return ready() ? lib.curl_multi_perform(multi_handle, running_handles) : CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_poll(CURLM *multi_handle, struct curl_waitfd extra_fds[],
                          unsigned int extra_nfds, int timeout_ms, int *ret)
{
    return ready() ? lib.curl_multi_poll(multi_handle, extra_fds, extra_nfds, timeout_ms, ret)
                   : CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_wakeup(CURLM *multi_handle)
{
    return ready() ? lib.curl_multi_wakeup(multi_handle) : CURLM_BAD_HANDLE;
}

CURLMsg *curl_multi_info_read(CURLM *multi_handle, int *msgs_in_queue)
{
    return ready() ? lib.curl_multi_info_read(multi_handle, msgs_in_queue) : NULL;
}

struct curl_slist *curl_slist_append(struct curl_slist *list, const char *data)
{
    return ready() ? lib.curl_slist_append(list, data) : NULL;
}

void curl_slist_free_all(struct curl_slist *list)
{
    if (ready()) {
        lib.curl_slist_free_all(list);
    }
}

CURLU *curl_url(void)
{
    return ready() ? lib.curl_url() : NULL;
}

void curl_url_cleanup(CURLU *handle)
{
    if (ready()) {
        lib.curl_url_cleanup(handle);
    }
}

CURLUcode curl_url_set(CURLU *handle, CURLUPart what, const char *part, unsigned int flags)
{
    return ready() ? lib.curl_url_set(handle, what, part, flags) : CURLUE_OUT_OF_MEMORY;
}

CURLUcode curl_url_get(CURLU *handle, CURLUPart what, char **part, unsigned int flags)
{
    return ready() ? lib.curl_url_get(handle, what, part, flags) : CURLUE_OUT_OF_MEMORY;
}
