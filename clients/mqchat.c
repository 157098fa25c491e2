/* mqchat: the command-line client of mosquitto-chat, on the chat_client
 * library, with the flags and habits of mosquitto_pub and mosquitto_sub.
 *
 * Exit status: 0 success, 1 the broker could not be reached or did not
 * answer in time (or output failed), 2 usage error (bad option, bad group
 * name), 3 the server refused (the connection, a request, a message, a
 * subscription), 4 the device is in use: another mqchat listens with the
 * same client id and state file.
 *
 * Waiting for the broker: send, history, unread, join and leave try to
 * connect for up to -W seconds, again and again, so that a command started
 * with the broker (at boot) does not fail while the broker comes up; listen
 * keeps trying until it is stopped, each attempt bounded by 10 s, the
 * pauses between them growing to 16 s (the library's reconnect). A
 * broker that refuses the connection (credentials, authorisation) ends the
 * command at once. */
#include "chat_client.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXIT_UNREACHABLE 1
#define EXIT_USAGE 2
#define EXIT_REFUSED 3
#define EXIT_IN_USE 4

#define DEFAULT_WAIT_S 10      /* -W: connect and answers */
#define RETRY_FIRST_MS 250     /* first pause between connect attempts (not listen) ... */
#define RETRY_MAX_MS 2000      /* ... doubling up to this */
#define DEFAULT_HISTORY 20     /* -n */
#define MAX_HISTORY 1000000    /* -n at most */
#define PROGRESS_EVERY_MS 1000 /* catch-up progress lines at most this often */
#define NAME_MAX_LEN 256

static const char *usage_text =
    "mqchat: group chat over MQTT with mosquitto-chat.\n"
    "\n"
    "Usage: mqchat [options] send <group> <text>...   send one message (-l: one per stdin line)\n"
    "       mqchat [options] listen <group>...        print each message once, in order\n"
    "       mqchat [options] history <group>          print the last messages (-n N)\n"
    "       mqchat [options] unread                   unread counts of this device's groups\n"
    "       mqchat [options] join <group>             join a group\n"
    "       mqchat [options] leave <group>            leave a group\n"
    "\n"
    "Options:\n"
    "  -h <host>      broker host (default 127.0.0.1)\n"
    "  -p <port>      broker port (default 1883)\n"
    "  -u <username>  MQTT username: your name in the chat (without it, the client id is)\n"
    "  -P <password>  MQTT password\n"
    "  -i <id>        MQTT client id, i.e. the device (default mqchat-<user>-<hostname>;\n"
    "                 with -u, commands other than listen add -<pid>)\n"
    "  -V <version>   MQTT version: 311 (default) or 5 (also mqttv311, mqttv5)\n"
    "  -q <qos>       QoS of sent messages: 1 (default) or 2\n"
    "  -k <seconds>   keep-alive (default 30)\n"
    "  -W <seconds>   listen: stop after this long; others: wait up to this long for the\n"
    "                 broker, retrying the connection, and for each answer (default 10)\n"
    "  -C <count>     listen: stop after printing this many messages\n"
    "  -l             send: send each line of stdin as a message\n"
    "  -n <count>     history: how many messages (default 20)\n"
    "  --json         listen, history: print the stored envelopes as JSON\n"
    "  --state <file> listen: the state file, the last id shown per group (default\n"
    "                 <client id>@<host>-<port>.state in $XDG_STATE_HOME/mqchat,\n"
    "                 else in ~/.local/state/mqchat)\n"
    "  --prefix <p>   the plugin's topic prefix (default chat)\n"
    "  --quiet        no progress or connection notes on stderr\n"
    "  --help         this text\n"
    "\n"
    "listen waits for the broker and reconnects by itself until stopped. Give each\n"
    "device its own client id: a second connection with the same id takes over, and\n"
    "the broker disconnects the first.\n"
    "\n"
    "Exit status: 0 success, 1 broker unreachable or silent, 2 usage error,\n"
    "3 refused by the server, 4 this device is already listening elsewhere.\n";

struct opts {
    const char *host;
    int port;
    const char *username;
    const char *password;
    const char *client_id;
    int version;
    int qos;
    int keepalive;
    int wait_s;     /* -W, 0: not given */
    long count;     /* -C, 0: unlimited */
    bool lines;     /* -l */
    long history_n; /* -n */
    bool json;      /* --json */
    const char *state;
    const char *prefix;
    bool quiet;
    const char *command;
    char **args; /* positional arguments after the command */
    int nargs;
};

/* What the callbacks tell the main thread (listen, send). */
static pthread_t g_main;
static atomic_int g_exit = -1; /* >= 0: stop with this status */
static atomic_long g_printed;
static long g_count;
static bool g_json;
static bool g_quiet;
static atomic_bool g_connected_once;
static atomic_bool g_waiting; /* listen started while the broker could not be reached */
static const char *g_client_id;
static int64_t g_last_progress;

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die_usage(const char *fmt, ...)
{
    va_list ap;

    fputs("mqchat: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nRun 'mqchat --help' for usage.\n", stderr);
    exit(EXIT_USAGE);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void note(const char *fmt, ...)
{
    va_list ap;

    if (g_quiet)
        return;
    fputs("mqchat: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Asks the main thread to stop with status (the first request wins). */
static void stop_main(int status)
{
    int expected = -1;

    if (atomic_compare_exchange_strong(&g_exit, &expected, status))
        pthread_kill(g_main, SIGUSR1);
}

/* ===========================================================================
 * Options
 * ========================================================================= */

static long parse_long(const char *flag, const char *v, long lo, long hi)
{
    char *end = NULL;
    long n;

    errno = 0;
    n = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n < lo || n > hi)
        die_usage("%s needs a number from %ld to %ld, not '%s'", flag, lo, hi, v);
    return n;
}

static int parse_version(const char *v)
{
    if (strcmp(v, "311") == 0 || strcmp(v, "mqttv311") == 0 || strcmp(v, "4") == 0)
        return 4;
    if (strcmp(v, "5") == 0 || strcmp(v, "mqttv5") == 0)
        return 5;
    die_usage("-V must be 311 or 5 (mqttv311, mqttv5), not '%s'", v);
}

static void parse_args(int argc, char **argv, struct opts *o)
{
    static char *positional[4096];
    int np = 0;
    bool only_args = false;

    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 1883;
    o->version = 4;
    o->qos = 1;
    o->keepalive = 30;
    o->history_n = DEFAULT_HISTORY;
    o->prefix = "chat";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = true;

        if (only_args || a[0] != '-' || a[1] == '\0') {
            if (np == (int)(sizeof positional / sizeof positional[0]))
                die_usage("too many arguments");
            positional[np++] = argv[i];
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_args = true;
            continue;
        }
        if (strcmp(a, "--help") == 0) {
            fputs(usage_text, stdout);
            exit(0);
        } else if (strcmp(a, "-l") == 0) {
            o->lines = true;
            takes = false;
        } else if (strcmp(a, "--json") == 0) {
            o->json = true;
            takes = false;
        } else if (strcmp(a, "--quiet") == 0) {
            o->quiet = true;
            takes = false;
        } else if (v == NULL &&
                   (strcmp(a, "-h") == 0 || strcmp(a, "-p") == 0 || strcmp(a, "-u") == 0 ||
                    strcmp(a, "-P") == 0 || strcmp(a, "-i") == 0 || strcmp(a, "-V") == 0 ||
                    strcmp(a, "-q") == 0 || strcmp(a, "-k") == 0 || strcmp(a, "-W") == 0 ||
                    strcmp(a, "-C") == 0 || strcmp(a, "-n") == 0 || strcmp(a, "--state") == 0 ||
                    strcmp(a, "--prefix") == 0)) {
            die_usage("%s needs a value", a);
        } else if (strcmp(a, "-h") == 0) {
            o->host = v;
        } else if (strcmp(a, "-p") == 0) {
            o->port = (int)parse_long(a, v, 1, 65535);
        } else if (strcmp(a, "-u") == 0) {
            o->username = v;
        } else if (strcmp(a, "-P") == 0) {
            o->password = v;
        } else if (strcmp(a, "-i") == 0) {
            if (v[0] == '\0')
                die_usage("-i needs a non-empty client id");
            o->client_id = v;
        } else if (strcmp(a, "-V") == 0) {
            o->version = parse_version(v);
        } else if (strcmp(a, "-q") == 0) {
            o->qos = (int)parse_long(a, v, 1, 2);
        } else if (strcmp(a, "-k") == 0) {
            o->keepalive = (int)parse_long(a, v, 5, 65535);
        } else if (strcmp(a, "-W") == 0) {
            o->wait_s = (int)parse_long(a, v, 1, 86400 * 365);
        } else if (strcmp(a, "-C") == 0) {
            o->count = parse_long(a, v, 1, LONG_MAX);
        } else if (strcmp(a, "-n") == 0) {
            o->history_n = parse_long(a, v, 1, MAX_HISTORY);
        } else if (strcmp(a, "--state") == 0) {
            o->state = v;
        } else if (strcmp(a, "--prefix") == 0) {
            o->prefix = v;
        } else {
            die_usage("unknown option '%s'", a);
        }
        if (takes)
            i++;
    }
    if (np == 0)
        die_usage("no command given");
    o->command = positional[0];
    o->args = positional + 1;
    o->nargs = np - 1;
}

/* Exits with a usage error unless group is valid. */
static void check_group(const char *group)
{
    const char *why = chat_client_group_error(group);

    if (why != NULL)
        die_usage("bad group name '%s': %s", group, why);
}

/* The login name, for default client ids. */
static void login_name(char *buf, size_t size)
{
    struct passwd *pw = getpwuid(getuid());
    const char *u = getenv("USER");

    if (pw != NULL && pw->pw_name != NULL)
        u = pw->pw_name;
    snprintf(buf, size, "%s", u != NULL && u[0] != '\0' ? u : "user");
}

/* The client id when -i is not given: one stable id per user and host is
 * one device. With -u the member is the username, so commands other than
 * listen use an id of their own and never take over a running listener's
 * connection; without -u the client id is the member's name, so every
 * command keeps it. */
static void default_client_id(const struct opts *o, bool listen, char *buf, size_t size)
{
    char user[NAME_MAX_LEN], host[NAME_MAX_LEN];

    if (o->username != NULL)
        snprintf(user, sizeof user, "%s", o->username);
    else
        login_name(user, sizeof user);
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    if (o->username != NULL && !listen)
        snprintf(buf, size, "mqchat-%s-%s-%ld", user, host, (long)getpid());
    else
        snprintf(buf, size, "mqchat-%s-%s", user, host);
}

/* mkdir -p of the directories above path (mode 0700). */
static int make_parents(char *path)
{
    for (char *p = path + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST) {
            *p = '/';
            return -1;
        }
        *p = '/';
    }
    return 0;
}

/* The default state file of a client id and broker. Returns 0, or -1 when
 * there is no home directory or the name would not fit (a cut name could be
 * another device's file). */
static int default_state(const struct opts *o, const char *client_id, char *buf, size_t size)
{
    const char *xdg = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    char name[3 * NAME_MAX_LEN];
    int n;

    n = snprintf(name, sizeof name, "%s@%s-%d.state", client_id, o->host, o->port);
    if (n < 0 || (size_t)n >= sizeof name)
        return -1;
    for (char *p = name; *p != '\0'; p++)
        if (*p == '/')
            *p = '_';
    if (xdg != NULL && xdg[0] == '/')
        n = snprintf(buf, size, "%s/mqchat/%s", xdg, name);
    else if (home != NULL && home[0] != '\0')
        n = snprintf(buf, size, "%s/.local/state/mqchat/%s", home, name);
    else
        return -1;
    if (n < 0 || (size_t)n >= size)
        return -1;
    return make_parents(buf);
}

/* ===========================================================================
 * Output
 * ========================================================================= */

/* Prints one message as "[group #id] from: body" (or its JSON). Control
 * characters from other people never reach the terminal raw. Returns false
 * when stdout failed. */
static bool print_message(const chat_client_message *m, bool json)
{
    const char *text = m->body != NULL ? m->body : m->json;

    if (json) {
        fputs(m->json, stdout);
    } else {
        printf("[%s #%llu] %s: ", m->group, (unsigned long long)m->id, m->from);
        for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
            if (*p == '\n')
                fputs("\n    ", stdout);
            else if (*p == '\t' || (*p >= 0x20 && *p != 0x7F))
                putchar(*p);
            else
                putchar('?');
        }
    }
    putchar('\n');
    return fflush(stdout) == 0 && !ferror(stdout);
}

static bool on_message(void *arg, const chat_client_message *m)
{
    (void)arg;
    if (g_count > 0 && atomic_load(&g_printed) >= g_count)
        return false; /* -C reached: leave the rest unshown */
    if (!print_message(m, g_json)) {
        fprintf(stderr, "mqchat: cannot write to stdout: %s\n", strerror(errno));
        stop_main(EXIT_UNREACHABLE);
        return false;
    }
    if (atomic_fetch_add(&g_printed, 1) + 1 == g_count)
        stop_main(0);
    return true;
}

static void on_event(void *arg, const chat_client_event *ev)
{
    int64_t now;

    (void)arg;
    switch (ev->type) {
    case CHAT_CLIENT_EV_CONNECTED:
        if (atomic_load(&g_connected_once))
            note("connected again");
        else if (atomic_load(&g_waiting))
            note("connected");
        atomic_store(&g_connected_once, true);
        break;
    case CHAT_CLIENT_EV_DISCONNECTED:
        if (ev->code == 0x8E) /* MQTT 5: Session taken over */
            fprintf(stderr,
                    "mqchat: another client connected with the client id '%s' and took over "
                    "this connection; reconnecting (give each device its own -i)\n",
                    g_client_id);
        else
            note("connection lost%s%s; reconnecting", ev->reason ? ": " : "",
                 ev->reason ? ev->reason : "");
        break;
    case CHAT_CLIENT_EV_CATCHUP:
        /* Only long catch-ups (more than a page) get progress lines. */
        now = now_ms();
        if (ev->id >= ev->head) {
            if (ev->pages > 1)
                note("%s: caught up at #%llu (%llu messages, %llu pages)", ev->group,
                     (unsigned long long)ev->id, (unsigned long long)ev->messages,
                     (unsigned long long)ev->pages);
        } else if (now - g_last_progress >= PROGRESS_EVERY_MS) {
            g_last_progress = now;
            note("%s: catching up: %llu pages, %llu messages so far, %llu remaining", ev->group,
                 (unsigned long long)ev->pages, (unsigned long long)ev->messages,
                 (unsigned long long)(ev->head - ev->id));
        }
        break;
    case CHAT_CLIENT_EV_SEND_REFUSED:
        fprintf(stderr, "mqchat: %s: message%s%s refused: %s\n", ev->group ? ev->group : "?",
                ev->cid ? " " : "", ev->cid ? ev->cid : "", ev->reason ? ev->reason : "?");
        break;
    case CHAT_CLIENT_EV_LISTEN_REFUSED:
        fprintf(stderr, "mqchat: %s: cannot listen: %s\n", ev->group ? ev->group : "?",
                ev->reason ? ev->reason : "?");
        stop_main(EXIT_REFUSED);
        break;
    case CHAT_CLIENT_EV_TRUNCATED:
        note("%s: messages before #%llu were removed by retention before you saw them", ev->group,
             (unsigned long long)ev->id);
        break;
    case CHAT_CLIENT_EV_ERROR:
        fprintf(stderr, "mqchat: %s%s%s\n", ev->group ? ev->group : "", ev->group ? ": " : "",
                ev->reason ? ev->reason : "error");
        break;
    }
}

/* ===========================================================================
 * Commands
 * ========================================================================= */

/* Status for a failed library call, after printing why. */
static int failed(const char *what, chat_client_err err)
{
    const char *reason = chat_client_reason();

    fprintf(stderr, "mqchat: %s: %s%s%s\n", what, chat_client_strerror(err),
            reason[0] != '\0' ? ": " : "", reason);
    switch (err) {
    case CHAT_CLIENT_ERR_REFUSED:
        return EXIT_REFUSED;
    case CHAT_CLIENT_ERR_INVAL:
        return EXIT_USAGE;
    case CHAT_CLIENT_ERR_IN_USE:
        return EXIT_IN_USE;
    default:
        return EXIT_UNREACHABLE;
    }
}

static int cmd_send(chat_client *c, const struct opts *o, int wait_ms)
{
    const char *group = o->args[0];
    chat_client_err err = CHAT_CLIENT_OK;
    size_t refused = 0, sent = 0;

    if (o->lines) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, stdin)) >= 0) {
            if (n > 0 && line[n - 1] == '\n')
                line[--n] = '\0';
            if (n == 0)
                continue; /* an empty line is no message */
            err = chat_client_send(c, group, line, NULL, 0);
            if (err == CHAT_CLIENT_ERR_FULL) {
                size_t r = 0;
                if ((err = chat_client_flush(c, wait_ms, &r)) == CHAT_CLIENT_OK) {
                    refused += r;
                    err = chat_client_send(c, group, line, NULL, 0);
                }
            }
            if (err != CHAT_CLIENT_OK)
                break;
            sent++;
        }
        free(line);
        if (err == CHAT_CLIENT_OK && ferror(stdin)) {
            fprintf(stderr, "mqchat: reading stdin: %s\n", strerror(errno));
            return EXIT_UNREACHABLE;
        }
    } else {
        size_t len = 0;
        char *text;
        for (int i = 1; i < o->nargs; i++)
            len += strlen(o->args[i]) + 1;
        if ((text = malloc(len + 1)) == NULL)
            return failed("send", CHAT_CLIENT_ERR_NOMEM);
        text[0] = '\0';
        for (int i = 1; i < o->nargs; i++) {
            if (i > 1)
                strcat(text, " ");
            strcat(text, o->args[i]);
        }
        err = chat_client_send(c, group, text, NULL, 0);
        free(text);
        sent = 1;
    }
    if (err != CHAT_CLIENT_OK)
        return failed("send", err);
    size_t r = 0;
    if ((err = chat_client_flush(c, wait_ms, &r)) != CHAT_CLIENT_OK)
        return failed("send (waiting for the broker)", err);
    refused += r;
    if (refused > 0) {
        fprintf(stderr, "mqchat: %zu of %zu message(s) refused\n", refused, sent);
        return EXIT_REFUSED;
    }
    return 0;
}

/* Connects, trying again for up to wait_ms while the broker cannot be
 * reached (it may be starting, or restarting); a refusal ends the wait.
 * Returns 0, or the exit status after saying why. */
static int connect_wait(chat_client *c, int wait_ms)
{
    int64_t deadline = now_ms() + wait_ms;
    int pause = RETRY_FIRST_MS;
    char why[512] = "";

    for (int attempt = 1;; attempt++) {
        int64_t left = deadline - now_ms();
        chat_client_err err = chat_client_connect(c, left > 0 ? (int)left : 1);
        struct timespec ts;

        if (err == CHAT_CLIENT_OK)
            return 0;
        if (err != CHAT_CLIENT_ERR_CONNECT && err != CHAT_CLIENT_ERR_TIMEOUT)
            return failed("cannot connect", err);
        /* The last attempt may be cut by the deadline: name the real cause. */
        if (err == CHAT_CLIENT_ERR_CONNECT || why[0] == '\0')
            snprintf(why, sizeof why, "%s", chat_client_reason());
        left = deadline - now_ms();
        if (left <= 0) {
            fprintf(stderr, "mqchat: cannot connect within %d s (%d attempts): %s\n",
                    (wait_ms + 999) / 1000, attempt, why);
            return EXIT_UNREACHABLE;
        }
        if (attempt == 1)
            note("%s; trying again for up to %lld s", why, (long long)(left + 999) / 1000);
        left = left < pause ? left : pause;
        ts.tv_sec = (time_t)(left / 1000);
        ts.tv_nsec = (long)(left % 1000) * 1000000L;
        nanosleep(&ts, NULL);
        pause = pause * 2 < RETRY_MAX_MS ? pause * 2 : RETRY_MAX_MS;
    }
}

static int cmd_listen(chat_client *c, const struct opts *o, sigset_t *sigs, int wait_ms)
{
    int64_t deadline = o->wait_s > 0 ? now_ms() + (int64_t)o->wait_s * 1000 : 0;
    int status = 0;
    chat_client_err err;

    /* Listened groups are subscribed on every connect, the first included. */
    for (int i = 0; i < o->nargs; i++) {
        if ((err = chat_client_listen(c, o->args[i])) != CHAT_CLIENT_OK)
            return failed("listen", err);
    }
    /* A listener started with the broker (at boot) waits for it: the
     * library keeps trying in the background, each attempt bounded by
     * wait_ms, until we stop. */
    err = chat_client_connect(c, wait_ms);
    if (err == CHAT_CLIENT_ERR_CONNECT || err == CHAT_CLIENT_ERR_TIMEOUT) {
        atomic_store(&g_waiting, true);
        note("%s; waiting for the broker (Ctrl-C to stop)", chat_client_reason());
    } else if (err != CHAT_CLIENT_OK) {
        return failed("cannot connect", err);
    }
    /* Wait for a signal: Ctrl-C, kill, or a callback's SIGUSR1. */
    for (;;) {
        int sig = 0;
        if (deadline > 0) {
            int64_t left = deadline - now_ms();
            struct timespec ts;
            if (left <= 0)
                break;
            ts.tv_sec = (time_t)(left / 1000);
            ts.tv_nsec = (long)(left % 1000) * 1000000L;
            sig = sigtimedwait(sigs, NULL, &ts);
            if (sig < 0) {
                if (errno == EAGAIN)
                    break;
                continue; /* EINTR */
            }
        } else if (sigwait(sigs, &sig) != 0) {
            continue;
        }
        if (sig == SIGUSR1 && atomic_load(&g_exit) < 0)
            continue;
        break;
    }
    if (atomic_load(&g_exit) >= 0)
        status = atomic_load(&g_exit);
    if (status == 0 && !atomic_load(&g_connected_once)) {
        fprintf(stderr, "mqchat: stopped before the broker could be reached\n");
        status = EXIT_UNREACHABLE;
    }
    return status;
}

static void print_page_oldest_first(chat_client_message **msgs, size_t n, bool json)
{
    for (size_t i = n; i > 0; i--)
        print_message(msgs[i - 1], json);
}

static int cmd_history(chat_client *c, const struct opts *o)
{
    const char *group = o->args[0];
    chat_client_page **pages = NULL;
    chat_client_message **msgs = NULL;
    size_t npages = 0, n = 0, want = (size_t)o->history_n;
    uint64_t before = 0;
    int status = 0;

    /* Pages come newest first; collect, then print oldest first. */
    for (size_t round = 0; n < want && round < want; round++) {
        chat_client_page *p = NULL, **np;
        chat_client_message **nm;
        chat_client_err err = chat_client_history(c, group, before, want - n, &p);
        if (err != CHAT_CLIENT_OK) {
            status = failed("history", err);
            break;
        }
        if ((np = realloc(pages, (npages + 1) * sizeof *pages)) == NULL ||
            (nm = realloc(msgs, (n + p->count) * sizeof *msgs + 1)) == NULL) {
            if (np != NULL)
                pages = np;
            chat_client_page_free(p);
            status = failed("history", CHAT_CLIENT_ERR_NOMEM);
            break;
        }
        pages = np;
        msgs = nm;
        pages[npages++] = p;
        for (size_t i = 0; i < p->count && n < want; i++)
            msgs[n++] = &p->messages[i];
        if (p->count == 0 || !p->more)
            break;
        before = p->messages[p->count - 1].id;
    }
    if (status == 0)
        print_page_oldest_first(msgs, n, o->json);
    for (size_t i = 0; i < npages; i++)
        chat_client_page_free(pages[i]);
    free(pages);
    free(msgs);
    if (status == 0 && (fflush(stdout) != 0 || ferror(stdout))) {
        fprintf(stderr, "mqchat: cannot write to stdout: %s\n", strerror(errno));
        return EXIT_UNREACHABLE;
    }
    return status;
}

static int cmd_unread(chat_client *c)
{
    chat_client_group_status *list = NULL;
    size_t n = 0;
    chat_client_err err = chat_client_unread(c, &list, &n);

    if (err != CHAT_CLIENT_OK)
        return failed("unread", err);
    if (n == 0)
        printf("no groups yet: join one with 'mqchat join <group>', or by sending to or "
               "listening to an open group\n");
    for (size_t i = 0; i < n; i++)
        printf("%s: %llu unread (head #%llu)\n", list[i].group, (unsigned long long)list[i].unread,
               (unsigned long long)list[i].head);
    chat_client_unread_free(list, n);
    return fflush(stdout) == 0 ? 0 : EXIT_UNREACHABLE;
}

static int cmd_membership(chat_client *c, const struct opts *o, bool join)
{
    uint64_t head = 0;
    chat_client_err err = join ? chat_client_join(c, o->args[0], NULL, &head)
                               : chat_client_leave(c, o->args[0], NULL);

    if (err != CHAT_CLIENT_OK)
        return failed(join ? "join" : "leave", err);
    if (join)
        printf("joined %s (head #%llu)\n", o->args[0], (unsigned long long)head);
    else
        printf("left %s\n", o->args[0]);
    return fflush(stdout) == 0 ? 0 : EXIT_UNREACHABLE;
}

/* ===========================================================================
 * main
 * ========================================================================= */

/* Checks the command's arguments; exits on a usage error. */
static void check_command(const struct opts *o)
{
    const char *cmd = o->command;

    if (strcmp(cmd, "send") == 0) {
        if (o->nargs < 1 || (o->lines ? o->nargs != 1 : o->nargs < 2))
            die_usage(o->lines ? "usage: mqchat send -l <group> (lines on stdin)"
                               : "usage: mqchat send <group> <text>...");
    } else if (strcmp(cmd, "listen") == 0) {
        if (o->nargs < 1)
            die_usage("usage: mqchat listen <group>...");
    } else if (strcmp(cmd, "history") == 0 || strcmp(cmd, "join") == 0 ||
               strcmp(cmd, "leave") == 0) {
        if (o->nargs != 1)
            die_usage("usage: mqchat %s <group>", cmd);
    } else if (strcmp(cmd, "unread") == 0) {
        if (o->nargs != 0)
            die_usage("usage: mqchat unread");
    } else {
        die_usage("unknown command '%s'", cmd);
    }
    for (int i = 0; i < o->nargs && strcmp(cmd, "send") != 0; i++)
        check_group(o->args[i]);
    if (strcmp(cmd, "send") == 0)
        check_group(o->args[0]);
}

int main(int argc, char **argv)
{
    struct opts o;
    chat_client_options co = {0};
    chat_client *c = NULL;
    char client_id[4 * NAME_MAX_LEN], state[4096];
    bool listen;
    int wait_ms, status;
    sigset_t sigs;
    chat_client_err err;
    struct sigaction ign;

    parse_args(argc, argv, &o);
    check_command(&o);
    listen = strcmp(o.command, "listen") == 0;
    g_json = o.json;
    g_quiet = o.quiet;
    g_count = listen ? o.count : 0;
    wait_ms = (listen || o.wait_s == 0 ? DEFAULT_WAIT_S : o.wait_s) * 1000;
    if (o.client_id != NULL) {
        if (strlen(o.client_id) >= sizeof client_id)
            die_usage("-i: a client id of at most %zu bytes, please", sizeof client_id - 1);
        snprintf(client_id, sizeof client_id, "%s", o.client_id);
    } else {
        default_client_id(&o, listen, client_id, sizeof client_id);
    }
    g_client_id = client_id;

    /* Signals go to sigwait in the main thread; every thread started from
     * here (Paho's, the library's) inherits the mask. A closed stdout is an
     * error to report, not a reason to die silently. */
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, NULL);
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGUSR1);
    if (listen)
        pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    g_main = pthread_self();

    co.host = o.host;
    co.port = o.port;
    co.client_id = client_id;
    co.username = o.username;
    co.password = o.password;
    co.mqtt_version = o.version;
    co.keepalive_s = o.keepalive;
    co.topic_prefix = o.prefix;
    co.send_qos = o.qos;
    co.request_timeout_ms = wait_ms;
    co.on_event = on_event;
    if (listen) {
        co.on_message = on_message;
        if (o.state != NULL) {
            co.state_path = o.state;
        } else if (default_state(&o, client_id, state, sizeof state) == 0) {
            co.state_path = state;
        } else {
            fprintf(stderr, "mqchat: no default state file (HOME unset, or the name too long): "
                            "use --state, or messages shown before a restart may show again\n");
        }
    }
    if ((err = chat_client_create(&co, &c)) == CHAT_CLIENT_ERR_IN_USE) {
        fprintf(stderr,
                "mqchat: device '%s' is already listening (%s): stop that mqchat, or give this "
                "one a device of its own with -i <client id>\n",
                client_id, chat_client_reason());
        return EXIT_IN_USE;
    } else if (err != CHAT_CLIENT_OK) {
        return failed("cannot start", err);
    }
    if (listen) {
        status = cmd_listen(c, &o, &sigs, wait_ms);
    } else if ((status = connect_wait(c, wait_ms)) != 0) {
        chat_client_destroy(c);
        return status == EXIT_USAGE ? EXIT_UNREACHABLE : status;
    } else if (strcmp(o.command, "send") == 0) {
        status = cmd_send(c, &o, wait_ms);
    } else if (strcmp(o.command, "history") == 0) {
        status = cmd_history(c, &o);
    } else if (strcmp(o.command, "unread") == 0) {
        status = cmd_unread(c);
    } else {
        status = cmd_membership(c, &o, strcmp(o.command, "join") == 0);
    }
    /* Acks what was shown, so the next start resumes right after it. */
    err = chat_client_disconnect(c, wait_ms);
    if (err != CHAT_CLIENT_OK && status == 0 && !listen)
        status = failed("disconnect", err);
    chat_client_destroy(c);
    return status;
}
