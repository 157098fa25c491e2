/* mqchat_status.c: the exit status of mqchat for a failed library call, in
 * a file of its own because main, the commands and the admin commands all
 * end with it (and so that none of them has to call another's file). */
#include <stdio.h>

#include "mqchat.h"

/* Status for a failed library call, after printing why. */
int mqchat_failed(const char *what, chat_client_err err)
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
