/* test_admin.c: operating the plugin from the client side (issue 12):
 * chat_client_request, `mqchat admin ...` (a table, --json, exit status and
 * errors as mosquitto_ctrl has them), and Debian's prometheus-mqtt-exporter
 * with the configuration docs/prometheus-mqtt-exporter.yaml ships, started
 * against the test broker: its /metrics on loopback shows the messages
 * stored. */
#include "ct.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "chat_client.h"

#define MAX_ARGS 32
#define EXPORTER "/usr/bin/prometheus-mqtt-exporter"

static char *g_stdout, *g_stderr; /* of the last run */
static char g_port[16];

/* Runs mqchat -p <port> with the NULL-terminated arguments; checks its exit
 * status; keeps its output. */
static void mqchat_run(int expect, ...)
{
    char *argv[MAX_ARGS + 4] = {(char *)MQCHAT_BIN, "-p", g_port, "--quiet"};
    char cmd[1024] = "mqchat";
    int argc = 4, status;
    va_list ap;

    va_start(ap, expect);
    for (const char *a, *prev = ""; argc + 2 < MAX_ARGS && (a = va_arg(ap, const char *)) != NULL;
         prev = a) {
        argv[argc++] = (char *)a;
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " '%s'", a);
        /* A broker that verifies usernames knows each test user with its
         * name as password (ts_broker_conf.users); one that does not
         * ignores it. */
        if (strcmp(prev, "-u") == 0) {
            argv[argc++] = (char *)"-P";
            argv[argc++] = (char *)a;
        }
    }
    va_end(ap);
    argv[argc] = NULL;
    status = ct_run_output(argv, NULL, 30000, &g_stdout, &g_stderr);
    CHECK(status == expect, "%s: exit status %d, expected %d; stdout:\n%s\nstderr:\n%s", cmd,
          status, expect, g_stdout, g_stderr);
}

#define mqchat(expect, ...) mqchat_run(expect, __VA_ARGS__, NULL)

static void expect_out(const char *text)
{
    CHECK(strstr(g_stdout, text) != NULL, "stdout lacks \"%s\":\n%s", text, g_stdout);
}

static void expect_err(const char *text)
{
    CHECK(strstr(g_stderr, text) != NULL, "stderr lacks \"%s\":\n%s", text, g_stderr);
}

/* ===========================================================================
 * The library's generic request
 * ========================================================================= */

static void library(ts_broker *b)
{
    chat_client_options o = {.port = ts_broker_port(b),
                             .client_id = "lib-admin",
                             .username = "alice",
                             .password = "alice"};
    chat_client *c = NULL;
    char *answer = NULL;

    CHECK(chat_client_create(&o, &c) == CHAT_CLIENT_OK, "create: %s", chat_client_reason());
    CHECK(chat_client_connect(c, 10000) == CHAT_CLIENT_OK, "connect: %s", chat_client_reason());
    CHECK(chat_client_request(c, "{\"command\":\"stats\"}", &answer) == CHAT_CLIENT_OK, "stats: %s",
          chat_client_reason());
    CHECK(strstr(answer, "\"figures\":{\"messages/stored\":3,") != NULL &&
              strstr(answer, "correlationData") == NULL,
          "stats answer: %s", answer);
    chat_client_free(answer);
    answer = NULL;
    CHECK(chat_client_request(c, "{\"command\":\"members\"}", &answer) == CHAT_CLIENT_ERR_REFUSED &&
              strcmp(chat_client_reason(), "group is missing") == 0 && answer == NULL,
          "members without a group: %s", chat_client_reason());
    CHECK(chat_client_request(c, "[1]", &answer) == CHAT_CLIENT_ERR_INVAL, "not an object");
    CHECK(chat_client_request(c, "{\"command\":\"stats\",\"correlationData\":\"x\"}", &answer) ==
              CHAT_CLIENT_ERR_INVAL,
          "correlationData of its own");
    CHECK(chat_client_disconnect(c, 5000) == CHAT_CLIENT_OK, "disconnect");
    chat_client_destroy(c);

    o.client_id = "lib-bob";
    o.username = "bob";
    o.password = "bob";
    CHECK(chat_client_create(&o, &c) == CHAT_CLIENT_OK, "create");
    CHECK(chat_client_connect(c, 10000) == CHAT_CLIENT_OK, "connect");
    CHECK(chat_client_request(c, "{\"command\":\"stats\"}", &answer) == CHAT_CLIENT_ERR_REFUSED &&
              strcmp(chat_client_reason(), "only an admin may stats") == 0,
          "stats from bob: %s", chat_client_reason());
    chat_client_destroy(c);
    ts_log("chat_client_request: answers, refusals, bad commands");
}

/* ===========================================================================
 * mqchat admin
 * ========================================================================= */

static void cli(void)
{
    mqchat(0, "-u", "alice", "admin", "groups");
    expect_out("GROUP");
    expect_out("room1");
    mqchat(0, "-u", "alice", "--json", "admin", "groups");
    expect_out("[{\"group\":\"room1\",\"head\":3,\"first\":1,\"members\":1},{\"group\":\"room2\"");
    mqchat(0, "-u", "alice", "admin", "members", "room1");
    expect_out("MEMBER");
    expect_out("bob");
    mqchat(0, "-u", "alice", "--json", "admin", "members", "room1");
    expect_out("\"member\":\"bob\"");
    expect_out("\"read\":3"); /* bob has read the three he sent */
    mqchat(0, "-u", "alice", "admin", "stats");
    expect_out("messages/stored      4");
    mqchat(0, "-u", "alice", "--json", "admin", "stats");
    expect_out("\"figures\":{\"messages/stored\":4,");
    mqchat(0, "-u", "alice", "admin", "compact");
    expect_out("compaction done");
    mqchat(3, "-u", "alice", "admin", "backup");
    expect_err("backups are not configured: set plugin_opt_backup_dir");
    mqchat(3, "-u", "bob", "admin", "groups");
    expect_err("only an admin may groups");
    mqchat(3, "-u", "bob", "admin", "delete", "room1");
    expect_err("only an admin may delete");
    mqchat(2, "-u", "alice", "admin", "members");
    expect_err("usage: mqchat admin");
    mqchat(2, "-u", "alice", "admin", "delete", "a/b");
    expect_err("bad group name");
    mqchat(2, "-u", "alice", "admin", "frobnicate");
    mqchat(0, "-u", "alice", "admin", "delete", "room1");
    expect_out("deleted group room1 (head #3)");
    mqchat(0, "-u", "alice", "--json", "admin", "groups");
    expect_out("\"first\":4,\"members\":0");
    ts_log("mqchat admin: tables, --json, exit 0/2/3 with the reasons on stderr");
}

/* ===========================================================================
 * prometheus-mqtt-exporter
 * ========================================================================= */

/* GET /metrics from 127.0.0.1:port; the body, heap memory, or NULL. */
static char *http_get(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {2, 0};
    static const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!buf || fd < 0) {
        free(buf);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) {
        close(fd);
        free(buf);
        return NULL;
    }
    for (int i = 0; i < 1000; i++) {
        if (len + 1 == cap) {
            char *n = realloc(buf, cap * 2);
            if (!n)
                break;
            buf = n;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    return buf;
}

/* The value of the first series of metric in a /metrics text, or -1. */
static long long metric(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, name, n) == 0 && (p[n] == '{' || p[n] == ' ')) {
            const char *v = p[n] == '{' ? strchr(p, '}') : p + n;
            return v ? strtoll(v + 1, NULL, 10) : -1;
        }
    }
    return -1;
}

static void exporter(ts_broker *b)
{
    char conf[512], out[512], addr[64], port[16];
    char *yaml, *text = NULL;
    long long stored = -1, groups = -1;
    int status = 0;

    CHECK(access(EXPORTER, X_OK) == 0,
          "%s is missing: scripts/deps --test installs prometheus-mqtt-exporter", EXPORTER);
    /* The configuration we ship, pointed at the test broker. */
    yaml = ts_read_file(CHAT_SOURCE_DIR "/docs/prometheus-mqtt-exporter.yaml", NULL);
    CHECK(yaml != NULL, "docs/prometheus-mqtt-exporter.yaml is missing");
    char *at = strstr(yaml, "tcp://127.0.0.1:1883");
    CHECK(at != NULL, "the shipped configuration does not name tcp://127.0.0.1:1883");
    snprintf(addr, sizeof addr, "tcp://127.0.0.1:%d", ts_broker_port(b));
    size_t head = (size_t)(at - yaml), tail = strlen(at + strlen("tcp://127.0.0.1:1883"));
    char *edited = malloc(head + strlen(addr) + tail + 1);
    CHECK(edited != NULL, "out of memory");
    memcpy(edited, yaml, head);
    strcpy(edited + head, addr);
    strcat(edited, at + strlen("tcp://127.0.0.1:1883"));
    ct_path(conf, sizeof conf, "exporter.yaml");
    ts_write_text(conf, edited);
    free(edited);
    free(yaml);
    ct_path(out, sizeof out, "exporter.log");
    snprintf(port, sizeof port, "%d", ts_free_port());
    char *argv[] = {EXPORTER,    "-config",      conf, "-listen-address",
                    "127.0.0.1", "-listen-port", port, NULL};
    pid_t pid = ts_spawn(argv, NULL, NULL, out, out);
    /* Figures come every second (sys_interval 1); the exporter takes them
     * retained at its subscribe, then as they change. */
    mqchat(0, "-u", "bob", "send", "room2", "one more");
    for (int i = 0; i < 200 && !(stored == 4 && groups == 2); i++) {
        int st = 0;
        CHECK(!ts_ended(pid, &st), "the exporter exited (status %d): see %s", st, out);
        free(text);
        text = http_get(atoi(port));
        stored = text ? metric(text, "mosquitto_chat_messages_stored_total") : -1;
        groups = text ? metric(text, "mosquitto_chat_groups") : -1;
        if (!(stored == 4 && groups == 2))
            ts_sleep_ms(100);
    }
    CHECK(stored == 4 && groups == 2,
          "the exporter's /metrics shows messages stored %lld, groups %lld, expected 4 and 2:\n%s",
          stored, groups, text ? text : "(no answer)");
    CHECK(metric(text, "mosquitto_chat_store_write_p99_microseconds") >= 0 &&
              metric(text, "mosquitto_chat_acks_total") >= 0,
          "figures missing from /metrics:\n%s", text);
    free(text);
    ts_signal(pid, SIGTERM);
    status = ts_wait(pid, 10000);
    (void)status;
    ts_log("prometheus-mqtt-exporter: mosquitto_chat_messages_stored_total 4 on /metrics");
}

int main(void)
{
    ct_init("clients_admin");
    ts_broker_conf conf = {.plugin_opts = (const char *const[]){"admins alice", NULL},
                           .users = ts_test_users,
                           .after = (const char *const[]){"sys_interval 1", NULL}};
    ts_broker *b = ts_broker_start_conf(&conf);
    snprintf(g_port, sizeof g_port, "%d", ts_broker_port(b));
    for (int i = 0; i < 3; i++)
        mqchat(0, "-u", "bob", "send", "room1", "hello");
    library(b);
    exporter(b);
    cli();
    ts_broker_destroy(b);
    free(g_stdout);
    free(g_stderr);
    return ct_pass();
}
