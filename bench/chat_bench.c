/* chat_bench: the load generator behind bench/run. Each subcommand does one
 * measurement against a broker already running on 127.0.0.1 and prints one
 * line of key=value pairs on stdout; bench/run starts the brokers, alternates
 * them and turns the lines into docs/benchmarks.md.
 *
 *   chat_bench port                          a free 127.0.0.1 port
 *   chat_bench wait    --port P              until the broker answers
 *   chat_bench ingest  --port P --pid PID --members M [--rate R] [--pub-port P2] ...
 *   chat_bench join    --port P --devices K --mode chat|session
 *   chat_bench fill    --port P --count N
 *   chat_bench catchup --port P --count N --mode chat|session [--pid PID]
 *   chat_bench appcatchup --port P --count N --via lib|mqchat --state FILE [--mqchat PATH]
 *   chat_bench idle    --pid PID             until the broker's CPU is quiet
 *   chat_bench quiet   [--max-busy CORES]    until the whole machine is quiet
 *   chat_bench receipts --port P --pid PID --members M --rate R --mode read|ack
 *                                            every member reads (or acks) every message
 *   chat_bench presence --port P --online N --readers K --rate R
 *                                            N raw connections online in one group
 *   chat_bench push --port P --pid PID --registered N --groups G --sink-port S --push 0|1
 *                   [--hang 1] [--rate R]   N offline members notified through a sink
 *
 * The same commands drive plain Mosquitto and Mosquitto with the plugin:
 * both see the same topic (chat/<group>) and the same JSON payloads of about
 * 200 bytes; with the plugin, subscribers receive the stored envelope, which
 * keeps the payload's fields. Every publisher stays within a bounded window
 * ahead of its acknowledgements and of the slowest subscriber, far below
 * Mosquitto's per-client in-flight and queue limits, so that neither broker
 * drops a message while measured; every run checks that none was lost.
 *
 * Every loop is bounded in count or time; only 127.0.0.1 is ever contacted.
 *
 * This file reads the options and runs the subcommand; the subcommands live
 * in files by family, listed in bench.h.
 */
#include "bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(
        stderr,
        "usage: chat_bench port | wait | idle | ingest | join | fill | catchup [--name value]...\n"
        "  --port P --pub-port P --pid PID --group G --mode chat|session --client ID --prefix P\n"
        "  --members M --devices K --window W --rate R --warm-ms T --dur-ms T\n"
        "  --timeout-ms T --idle-ms T --count N --first N --seq N --max-busy CORES\n"
        "  --online N --readers K --via lib|mqchat --state FILE --mqchat PATH\n"
        "  --registered N --groups G --sink-port S --push 0|1 --hang 0|1\n");
}

static bool parse_u64(const char *s, uint64_t *v)
{
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || !end || *end || s[0] == '-' || s[0] == '\0') {
        return false;
    }
    *v = x;
    return true;
}

static bool parse_opts(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.group = "bench",
                       .mode = "chat",
                       .client = NULL,
                       .prefix = "dev",
                       .via = "lib",
                       .mqchat = "mqchat",
                       .members = 1,
                       .devices = 1,
                       .window = 100,
                       .warm_ms = 300,
                       .dur_ms = 1000,
                       .timeout_ms = 60000,
                       .idle_ms = 2000,
                       .count = 1000,
                       .first = 1,
                       .max_busy = 0.2};
    for (int i = 2; i < argc; i += 2) {
        const char *name = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t u = 0;
        if (!val) {
            fprintf(stderr, "chat_bench: %s needs a value\n", name);
            return false;
        }
        bool num = parse_u64(val, &u);
        if (!strcmp(name, "--group")) {
            o->group = val;
        } else if (!strcmp(name, "--mode")) {
            o->mode = val;
        } else if (!strcmp(name, "--client")) {
            o->client = val;
        } else if (!strcmp(name, "--prefix")) {
            o->prefix = val;
        } else if (!strcmp(name, "--via")) {
            o->via = val;
        } else if (!strcmp(name, "--state")) {
            o->state = val;
        } else if (!strcmp(name, "--mqchat")) {
            o->mqchat = val;
        } else if (!strcmp(name, "--rate") || !strcmp(name, "--max-busy")) {
            char *end = NULL;
            double d = strtod(val, &end);
            if (!end || *end || d < 0) {
                fprintf(stderr, "chat_bench: bad %s %s\n", name, val);
                return false;
            }
            *(!strcmp(name, "--rate") ? &o->rate : &o->max_busy) = d;
        } else if (!num) {
            fprintf(stderr, "chat_bench: %s wants a number, not %s\n", name, val);
            return false;
        } else if (!strcmp(name, "--port") && u > 0 && u < 65536) {
            o->port = (int)u;
        } else if (!strcmp(name, "--pub-port") && u > 0 && u < 65536) {
            o->pub_port = (int)u;
        } else if (!strcmp(name, "--pid")) {
            o->pid = (long)u;
        } else if (!strcmp(name, "--members") && u <= BENCH_SET_MAX - 1) {
            o->members = (unsigned)u;
        } else if (!strcmp(name, "--devices") && u >= 1 && u <= BENCH_SET_MAX) {
            o->devices = (unsigned)u;
        } else if (!strcmp(name, "--window") && u >= 1 && u <= 900) {
            o->window = (unsigned)u;
        } else if (!strcmp(name, "--warm-ms") && u <= 600000) {
            o->warm_ms = (unsigned)u;
        } else if (!strcmp(name, "--dur-ms") && u >= 1 && u <= 600000) {
            o->dur_ms = (unsigned)u;
        } else if (!strcmp(name, "--timeout-ms") && u >= 1 && u <= 3600000) {
            o->timeout_ms = (unsigned)u;
        } else if (!strcmp(name, "--idle-ms") && u >= 1 && u <= 600000) {
            o->idle_ms = (unsigned)u;
        } else if (!strcmp(name, "--count") && u <= 100000000) {
            o->count = u;
        } else if (!strcmp(name, "--first") && u >= 1) {
            o->first = u;
        } else if (!strcmp(name, "--seq")) {
            o->seq = u;
        } else if (!strcmp(name, "--online") && u >= 2 && u <= 60000) {
            o->online = (unsigned)u;
        } else if (!strcmp(name, "--readers") && u <= 60000) {
            o->readers = (unsigned)u;
        } else if (!strcmp(name, "--registered") && u >= 1 && u <= 100000) {
            o->registered = (unsigned)u;
        } else if (!strcmp(name, "--groups") && u >= 1 && u <= 100) {
            o->groups = (unsigned)u;
        } else if (!strcmp(name, "--sink-port") && u > 0 && u < 65536) {
            o->sink_port = (int)u;
        } else if (!strcmp(name, "--hang") && u <= 1) {
            o->hang = u == 1;
        } else if (!strcmp(name, "--push") && u <= 1) {
            o->push_on = u == 1;
        } else {
            fprintf(stderr, "chat_bench: unknown option or value out of range: %s %s\n", name, val);
            return false;
        }
    }
    if (strcmp(o->via, "lib") != 0 && strcmp(o->via, "mqchat") != 0) {
        fprintf(stderr, "chat_bench: --via is lib or mqchat\n");
        return false;
    }
    if (strcmp(o->mode, "chat") != 0 && strcmp(o->mode, "session") != 0 &&
        strcmp(o->mode, "read") != 0 && strcmp(o->mode, "ack") != 0) {
        fprintf(stderr, "chat_bench: --mode is chat or session (receipts: read or ack)\n");
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    struct opts o;
    int rc = 2;

    if (argc < 2) {
        usage();
        return 2;
    }
    if (!parse_opts(argc, argv, &o)) {
        usage();
        return 2;
    }
    if (!strcmp(argv[1], "port")) {
        return cmd_port();
    }
    if (!strcmp(argv[1], "idle")) {
        return o.pid > 0 ? cmd_idle(&o) : 2;
    }
    if (!strcmp(argv[1], "quiet")) {
        return cmd_quiet(&o);
    }
    if (!o.port) {
        fprintf(stderr, "chat_bench: --port is required\n");
        return 2;
    }
    bench_payload_init();
    bench_lib_init();
    if (!strcmp(argv[1], "wait")) {
        rc = cmd_wait(&o);
    } else if (!strcmp(argv[1], "ingest")) {
        rc = cmd_ingest(&o);
    } else if (!strcmp(argv[1], "join")) {
        rc = cmd_join(&o);
    } else if (!strcmp(argv[1], "fill")) {
        rc = cmd_fill(&o);
    } else if (!strcmp(argv[1], "catchup")) {
        rc = cmd_catchup(&o);
    } else if (!strcmp(argv[1], "appcatchup")) {
        rc = cmd_appcatchup(&o);
    } else if (!strcmp(argv[1], "receipts")) {
        rc = cmd_receipts(&o);
    } else if (!strcmp(argv[1], "presence")) {
        rc = cmd_presence(&o);
    } else if (!strcmp(argv[1], "push")) {
        rc = cmd_push(&o);
    } else {
        usage();
    }
    bench_lib_cleanup();
    fflush(stdout);
    return rc;
}
