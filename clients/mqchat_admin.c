/* mqchat_admin.c: `mqchat admin ...`, the admin commands of the plugin
 * (docs/protocol.md, "Operations") on the library's generic request, with
 * mosquitto_ctrl's habits: a table on stdout (JSON with --json), errors on
 * stderr, the exit status of the rest of mqchat (3 when the plugin refused,
 * e.g. "only an admin may groups"). Listings are fetched in runs ("more",
 * "after") until complete; compact and backup wait (up to -W seconds) for
 * the job to end, asking `stats`. */
#include "mqchat.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RUNS_MAX 100000 /* runs of a listing at most: the plugin gives up to 1000 a run */
#define POLL_MS 200     /* between two looks at a running job */

/* Sends one command (a JSON object text); on success *entry is the parsed
 * answer. Returns 0 or the exit status after saying why. */
static int ask(chat_client *c, const char *what, const char *command, cJSON **entry)
{
    char *answer = NULL;
    chat_client_err err = chat_client_request(c, command, &answer);
    *entry = NULL;
    if (err != CHAT_CLIENT_OK)
        return mqchat_failed(what, err);
    *entry = cJSON_Parse(answer);
    chat_client_free(answer);
    if (!cJSON_IsObject(*entry)) {
        cJSON_Delete(*entry);
        *entry = NULL;
        fprintf(stderr, "mqchat: %s: the answer is not a JSON object\n", what);
        return EXIT_UNREACHABLE;
    }
    return 0;
}

static uint64_t num(const cJSON *o, const char *name)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(f) && f->valuedouble >= 0 ? (uint64_t)f->valuedouble : 0;
}

static const char *str(const cJSON *o, const char *name)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(f) ? f->valuestring : "";
}

/* Prints a name from the network: control characters never reach the
 * terminal raw. */
static void put_name(const char *s, int width)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++, n++)
        putchar(*p >= 0x20 && *p != 0x7F ? *p : '?');
    for (; n < width; n++)
        putchar(' ');
}

static int finish_output(void)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("mqchat: writing stdout");
        return EXIT_UNREACHABLE;
    }
    return 0;
}

/* Runs a listing command (groups, members of group) to its end; *all gets
 * every item of the array field in one array. */
static int list_all(chat_client *c, const char *command, const char *group, const char *field,
                    cJSON **all)
{
    char *after = NULL;
    int status = 0;
    *all = cJSON_CreateArray();
    for (int run = 0; status == 0 && run < RUNS_MAX; run++) {
        cJSON *cmd = cJSON_CreateObject(), *entry = NULL, *items;
        char *text;
        cJSON_AddStringToObject(cmd, "command", command);
        if (group)
            cJSON_AddStringToObject(cmd, "group", group);
        if (after)
            cJSON_AddStringToObject(cmd, "after", after);
        cJSON_AddNumberToObject(cmd, "limit", 1000);
        text = cJSON_PrintUnformatted(cmd);
        cJSON_Delete(cmd);
        if (!text || !*all) {
            cJSON_free(text);
            fprintf(stderr, "mqchat: out of memory\n");
            status = EXIT_UNREACHABLE;
            break;
        }
        status = ask(c, command, text, &entry);
        cJSON_free(text);
        if (status != 0)
            break;
        items = cJSON_DetachItemFromObjectCaseSensitive(entry, field);
        if (!cJSON_IsArray(items)) {
            fprintf(stderr, "mqchat: %s: the answer has no %s\n", command, field);
            cJSON_Delete(items);
            cJSON_Delete(entry);
            status = EXIT_UNREACHABLE;
            break;
        }
        while (items->child)
            cJSON_AddItemToArray(*all, cJSON_DetachItemViaPointer(items, items->child));
        cJSON_Delete(items);
        free(after);
        after = NULL;
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(entry, "more")) &&
            str(entry, "after")[0] != '\0')
            after = strdup(str(entry, "after"));
        cJSON_Delete(entry);
        if (!after)
            break;
    }
    free(after);
    return status;
}

static int print_json(const cJSON *v)
{
    char *text = cJSON_PrintUnformatted(v);
    if (text)
        puts(text);
    cJSON_free(text);
    return finish_output();
}

static int width_of(const cJSON *items, const char *field, int least)
{
    int w = least;
    const cJSON *it;
    cJSON_ArrayForEach(it, items)
    {
        int n = (int)strlen(str(it, field));
        w = n > w ? n : w;
    }
    return w > 64 ? 64 : w;
}

static int cmd_groups(chat_client *c, const struct opts *o)
{
    cJSON *groups = NULL;
    const cJSON *g;
    int status = list_all(c, "groups", NULL, "groups", &groups);
    if (status == 0 && o->json) {
        status = print_json(groups);
    } else if (status == 0) {
        int w = width_of(groups, "group", 5);
        put_name("GROUP", w);
        printf("  %10s %10s %8s\n", "HEAD", "FIRST", "MEMBERS");
        cJSON_ArrayForEach(g, groups)
        {
            put_name(str(g, "group"), w);
            printf("  %10" PRIu64 " %10" PRIu64 " %7" PRIu64 "%s\n", num(g, "head"),
                   num(g, "first"), num(g, "members"),
                   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(g, "members_capped")) ? "+" : " ");
        }
        status = finish_output();
    }
    cJSON_Delete(groups);
    return status;
}

static int cmd_members(chat_client *c, const struct opts *o, const char *group)
{
    cJSON *members = NULL;
    const cJSON *m, *d;
    int status = list_all(c, "members", group, "members", &members);
    if (status == 0 && o->json) {
        status = print_json(members);
    } else if (status == 0) {
        int w = width_of(members, "member", 6), dw = 6;
        cJSON_ArrayForEach(m, members)
        {
            int n = width_of(cJSON_GetObjectItemCaseSensitive(m, "devices"), "device", 6);
            dw = n > dw ? n : dw;
        }
        put_name("MEMBER", w);
        printf("  %10s  ", "READ");
        put_name("DEVICE", dw);
        printf("  %10s\n", "ACKED");
        cJSON_ArrayForEach(m, members)
        {
            const cJSON *devices = cJSON_GetObjectItemCaseSensitive(m, "devices");
            bool first = true;
            cJSON_ArrayForEach(d, devices)
            {
                put_name(first ? str(m, "member") : "", w);
                if (first)
                    printf("  %10" PRIu64 "  ", num(m, "read"));
                else
                    printf("  %10s  ", "");
                put_name(str(d, "device"), dw);
                printf("  %10" PRIu64 "\n", num(d, "acked"));
                first = false;
            }
            if (first) {
                put_name(str(m, "member"), w);
                printf("  %10" PRIu64 "  ", num(m, "read"));
                put_name("-", dw);
                printf("  %10s\n", "-");
            }
        }
        status = finish_output();
    }
    cJSON_Delete(members);
    return status;
}

static void print_stats_table(const cJSON *entry)
{
    const cJSON *figures = cJSON_GetObjectItemCaseSensitive(entry, "figures"), *f;
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(entry, "job");
    cJSON_ArrayForEach(f, figures)
    {
        printf("%-20s %" PRIu64 "\n", f->string, cJSON_IsNumber(f) ? (uint64_t)f->valuedouble : 0);
    }
    printf("%-20s %" PRIu64 "\n", "deletions", num(entry, "deletions"));
    if (job && strcmp(str(job, "kind"), "none") != 0) {
        printf("%-20s %s %s%s%s%s%s\n", "job", str(job, "kind"), str(job, "state"),
               str(job, "path")[0] ? " " : "", str(job, "path"), str(job, "error")[0] ? ": " : "",
               str(job, "error"));
    }
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* compact, backup: starts the job, then waits for its end (asking stats). */
static int cmd_job(chat_client *c, const struct opts *o, const char *kind, int wait_ms)
{
    char cmd[64];
    cJSON *entry = NULL, *job = NULL;
    int64_t deadline = mono_ms() + wait_ms;
    int status;

    snprintf(cmd, sizeof cmd, "{\"command\":\"%s\"}", kind);
    if ((status = ask(c, kind, cmd, &entry)) != 0)
        return status;
    if (!o->quiet && !o->json && strcmp(kind, "backup") == 0)
        fprintf(stderr, "mqchat: backup into %s started\n", str(entry, "path"));
    cJSON_Delete(entry);
    for (;;) {
        struct timespec ts = {0, POLL_MS * 1000000L};
        if ((status = ask(c, "stats", "{\"command\":\"stats\"}", &entry)) != 0)
            return status;
        job = cJSON_GetObjectItemCaseSensitive(entry, "job");
        if (strcmp(str(job, "state"), "running") != 0)
            break;
        cJSON_Delete(entry);
        if (mono_ms() >= deadline) {
            fprintf(stderr, "mqchat: the %s still runs after %d s: see 'mqchat admin stats'\n",
                    kind, wait_ms / 1000);
            return EXIT_UNREACHABLE;
        }
        nanosleep(&ts, NULL);
    }
    if (strcmp(str(job, "state"), "done") != 0 || strcmp(str(job, "kind"), kind) != 0) {
        fprintf(stderr, "mqchat: %s failed: %s\n", kind,
                str(job, "error")[0] ? str(job, "error") : str(job, "state"));
        cJSON_Delete(entry);
        return EXIT_REFUSED;
    }
    if (o->json) {
        status = print_json(job);
    } else if (strcmp(kind, "backup") == 0) {
        printf("backup written to %s (%" PRIu64 " records)\n", str(job, "path"),
               num(job, "records"));
        status = finish_output();
    } else {
        printf("compaction done\n");
        status = finish_output();
    }
    cJSON_Delete(entry);
    return status;
}

int mqchat_admin(chat_client *c, const struct opts *o, int wait_ms)
{
    const char *sub = o->args[0];
    cJSON *entry = NULL;
    int status;

    if (strcmp(sub, "groups") == 0)
        return cmd_groups(c, o);
    if (strcmp(sub, "members") == 0)
        return cmd_members(c, o, o->args[1]);
    if (strcmp(sub, "compact") == 0 || strcmp(sub, "backup") == 0)
        return cmd_job(c, o, sub, wait_ms);
    if (strcmp(sub, "stats") == 0) {
        if ((status = ask(c, "stats", "{\"command\":\"stats\"}", &entry)) != 0)
            return status;
        cJSON_DeleteItemFromObjectCaseSensitive(entry, "command");
        if (o->json) {
            status = print_json(entry);
        } else {
            print_stats_table(entry);
            status = finish_output();
        }
        cJSON_Delete(entry);
        return status;
    }
    /* delete */
    cJSON *cmd = cJSON_CreateObject();
    cJSON_AddStringToObject(cmd, "command", "delete");
    cJSON_AddStringToObject(cmd, "group", o->args[1]);
    char *text = cJSON_PrintUnformatted(cmd);
    cJSON_Delete(cmd);
    if (!text) {
        fprintf(stderr, "mqchat: out of memory\n");
        return EXIT_UNREACHABLE;
    }
    status = ask(c, "delete", text, &entry);
    cJSON_free(text);
    if (status != 0)
        return status;
    if (o->json) {
        status = print_json(entry);
    } else {
        printf("deleted group %s (head #%" PRIu64 ")%s\n", o->args[1], num(entry, "head"),
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(entry, "done"))
                   ? ""
                   : "; its records are removed in the background");
        status = finish_output();
    }
    cJSON_Delete(entry);
    return status;
}
