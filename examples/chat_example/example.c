/* example.c: a complete small chat program on the chat_client library (shown
 * in docs/client.md): it prints every message of one group exactly once, in
 * order, catching up on what it missed, and sends each line typed on stdin.
 *
 *   chat_example <host> <port> <name> <group>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chat_client.h>

/* Runs on the library's dispatcher thread, once per message id, in order. */
static bool on_message(void *arg, const chat_client_message *m)
{
    (void)arg;
    printf("[%s #%llu] %s: %s\n", m->group, (unsigned long long)m->id, m->from,
           m->body != NULL ? m->body : m->json);
    return fflush(stdout) == 0; /* false: stop, and show it again next time */
}

static void on_event(void *arg, const chat_client_event *ev)
{
    (void)arg;
    if (ev->type == CHAT_CLIENT_EV_DISCONNECTED) /* with the broker's reason, if it gave one */
        fprintf(stderr, "(connection lost%s%s; reconnecting)\n", ev->reason ? ": " : "",
                ev->reason ? ev->reason : "");
    else if (ev->type == CHAT_CLIENT_EV_SEND_REFUSED || ev->type == CHAT_CLIENT_EV_ERROR)
        fprintf(stderr, "(%s)\n", ev->reason);
}

int main(int argc, char **argv)
{
    chat_client_options opts = {0};
    chat_client *c = NULL;
    chat_client_err err;
    char state[512], line[4096];

    if (argc != 5) {
        fprintf(stderr, "usage: %s <host> <port> <name> <group>\n", argv[0]);
        return 2;
    }
    snprintf(state, sizeof state, "%s.state", argv[3]);
    opts.host = argv[1];
    opts.port = atoi(argv[2]);
    opts.client_id = argv[3]; /* one device; without a username, also the name */
    opts.state_path = state;  /* last id shown per group: no repeats after a restart */
    opts.on_message = on_message;
    opts.on_event = on_event;
    if ((err = chat_client_create(&opts, &c)) != CHAT_CLIENT_OK ||
        (err = chat_client_listen(c, argv[4])) != CHAT_CLIENT_OK ||
        (err = chat_client_connect(c, 5000)) != CHAT_CLIENT_OK) {
        fprintf(stderr, "%s: %s %s\n", argv[0], chat_client_strerror(err), chat_client_reason());
        chat_client_destroy(c);
        return 1;
    }
    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] != '\0' &&
            (err = chat_client_send(c, argv[4], line, NULL, 0)) != CHAT_CLIENT_OK)
            fprintf(stderr, "not sent: %s %s\n", chat_client_strerror(err), chat_client_reason());
    }
    err = chat_client_flush(c, 5000, NULL); /* wait until the broker has them all */
    chat_client_destroy(c);                 /* acks what was shown, disconnects */
    return err == CHAT_CLIENT_OK ? 0 : 1;
}
