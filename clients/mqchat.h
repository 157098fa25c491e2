/* mqchat.h: what the parts of mqchat share: main and its options
 * (mqchat.c), the commands with their output (mqchat_commands.c), the
 * admin commands (mqchat_admin.c) and the exit status of a failed call
 * (mqchat_status.c). */
#ifndef MQCHAT_H
#define MQCHAT_H

#include <signal.h>
#include <stdbool.h>

#include "chat_client.h"

#define EXIT_UNREACHABLE 1
#define EXIT_USAGE 2
#define EXIT_REFUSED 3
#define EXIT_IN_USE 4

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
    bool no_read; /* --no-read: listen does not mark what it prints as read */
    const char *command;
    char **args; /* positional arguments after the command */
    int nargs;
};

/* One run of a command (mqchat_commands.c): what the callbacks need (the
 * options, the client id, the calling thread as the one to wake) and what
 * they tell that thread. Created by mqchat_create (NULL: out of memory)
 * with o and client_id, which must outlive it; freed by mqchat_destroy
 * (NULL accepted) once the client and its callbacks are gone. */
struct mqchat;
struct mqchat *mqchat_create(const struct opts *o, bool listen, const char *client_id);
void mqchat_destroy(struct mqchat *m);

/* The callbacks of the chat_client; arg is the struct mqchat. */
bool mqchat_on_message(void *arg, const chat_client_message *m);
void mqchat_on_event(void *arg, const chat_client_event *ev);
bool mqchat_on_commit(void *arg);

/* Prints why a library call failed and returns the exit status for it
 * (mqchat_status.c). */
int mqchat_failed(const char *what, chat_client_err err);

/* mqchat admin ...: the admin commands (mqchat_admin.c); returns the exit
 * status. */
int mqchat_admin(chat_client *c, const struct opts *o, int wait_ms);

/* Runs o's command on c (waiting for signals in sigs when listening),
 * then disconnects; returns the exit status. c's callbacks must have m as
 * their arg. */
int mqchat_run(struct mqchat *m, chat_client *c, const struct opts *o, sigset_t *sigs, int wait_ms);

#endif
