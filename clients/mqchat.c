/* mqchat: the command-line client of mosquitto-chat, on the chat_client
 * library, with the flags and habits of mosquitto_pub and mosquitto_sub.
 *
 * Exit status: 0 success, 1 the broker could not be reached or did not
 * answer in time (or output failed), 2 usage error (bad option, bad group
 * name), 3 the server refused (the connection, a request, a message, a
 * subscription), 4 the device is in use: another mqchat listens with the
 * same client id and state file.
 *
 * Waiting for the broker: send, history, unread, join, leave, who and
 * receipts try to connect for up to -W seconds, again and again, so that a
 * command started with the broker (at boot) does not fail while the broker
 * comes up; listen
 * keeps trying until it is stopped, each attempt bounded by 10 s, the
 * pauses between them growing to 16 s (the library's reconnect). A
 * broker that refuses the connection (credentials, authorisation) ends the
 * command at once. */
#include "mqchat.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_WAIT_S 10   /* -W: connect and answers */
#define DEFAULT_HISTORY 20  /* -n */
#define MAX_HISTORY 1000000 /* -n at most */
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
    "       mqchat [options] who <group>              who of the group is online\n"
    "       mqchat [options] receipts <group> [id]    who read up to which message (\"read by\n"
    "                                                 k of n\" for #id, default the newest)\n"
    "       mqchat [options] admin groups             (admins) every group: head, first, members\n"
    "       mqchat [options] admin members <group>    (admins) members, read markers, devices\n"
    "       mqchat [options] admin stats              (admins) the plugin's figures\n"
    "       mqchat [options] admin delete <group>     (admins) delete a group's messages and "
    "members\n"
    "       mqchat [options] admin compact|backup     (admins) compact or back up the store\n"
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
    "  --json         listen, history: print the stored envelopes as JSON;\n"
    "                 admin: print the plugin's answers as JSON instead of a table\n"
    "  --no-read      listen: do not mark the messages printed as read\n"
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
    o->prefix = NULL; /* the library's default */
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
        } else if (strcmp(a, "--no-read") == 0) {
            o->no_read = true;
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
            o->wait_s = (int)parse_long(a, v, 1, 86400L * 365);
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
               strcmp(cmd, "leave") == 0 || strcmp(cmd, "who") == 0) {
        if (o->nargs != 1)
            die_usage("usage: mqchat %s <group>", cmd);
    } else if (strcmp(cmd, "receipts") == 0) {
        if (o->nargs != 1 && o->nargs != 2)
            die_usage("usage: mqchat receipts <group> [id]");
        if (o->nargs == 2)
            (void)parse_long("receipts: id", o->args[1], 1, LONG_MAX);
    } else if (strcmp(cmd, "unread") == 0) {
        if (o->nargs != 0)
            die_usage("usage: mqchat unread");
    } else if (strcmp(cmd, "admin") == 0) {
        const char *sub = o->nargs > 0 ? o->args[0] : "";
        bool with_group = strcmp(sub, "members") == 0 || strcmp(sub, "delete") == 0;
        bool alone = strcmp(sub, "groups") == 0 || strcmp(sub, "stats") == 0 ||
                     strcmp(sub, "compact") == 0 || strcmp(sub, "backup") == 0;
        if (!(with_group && o->nargs == 2) && !(alone && o->nargs == 1))
            die_usage("usage: mqchat admin groups|members <group>|stats|delete <group>|compact|"
                      "backup");
        if (with_group)
            check_group(o->args[1]);
        return;
    } else {
        die_usage("unknown command '%s'", cmd);
    }
    for (int i = 0; i < o->nargs && strcmp(cmd, "send") != 0 && strcmp(cmd, "receipts") != 0; i++)
        check_group(o->args[i]);
    if (strcmp(cmd, "receipts") == 0)
        check_group(o->args[0]);
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
    struct mqchat *m = NULL;

    parse_args(argc, argv, &o);
    check_command(&o);
    listen = strcmp(o.command, "listen") == 0;
    wait_ms = (listen || o.wait_s == 0 ? DEFAULT_WAIT_S : o.wait_s) * 1000;
    if (o.client_id != NULL) {
        if (strlen(o.client_id) >= sizeof client_id)
            die_usage("-i: a client id of at most %zu bytes, please", sizeof client_id - 1);
        snprintf(client_id, sizeof client_id, "%s", o.client_id);
    } else {
        default_client_id(&o, listen, client_id, sizeof client_id);
    }
    if ((m = mqchat_create(&o, listen, client_id)) == NULL)
        return mqchat_failed("cannot start", CHAT_CLIENT_ERR_NOMEM);

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
    co.on_event = mqchat_on_event;
    co.arg = m;
    if (listen) {
        co.on_message = mqchat_on_message;
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
        mqchat_destroy(m);
        return EXIT_IN_USE;
    } else if (err != CHAT_CLIENT_OK) {
        mqchat_destroy(m);
        return mqchat_failed("cannot start", err);
    }
    /* listen buffers stdout: the library asks for it to go out before the
     * state file says those lines were shown. */
    if (listen)
        (void)chat_client_set_commit(c, mqchat_on_commit);
    status = mqchat_run(m, c, &o, &sigs, wait_ms);
    chat_client_destroy(c);
    mqchat_destroy(m);
    return status;
}
