/* group.c: the groups of a client (see group.h). */
#include "group.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"

/* The sequencers hold envelopes (struct chat_env, one block each). */
static void free_env(void *item)
{
    free(item);
}

struct chat_group *chat_groups_find(const chat_groups *gs, const char *name)
{
    for (struct chat_group *g = gs->head; g != NULL; g = g->next)
        if (strcmp(g->name, name) == 0)
            return g;
    return NULL;
}

struct chat_group *chat_groups_get(chat_groups *gs, const char *name)
{
    struct chat_group *g = chat_groups_find(gs, name);

    if (g != NULL)
        return g;
    if ((g = calloc(1, sizeof *g)) == NULL || (g->name = strdup(name)) == NULL) {
        free(g);
        return NULL;
    }
    chat_seq_init(&g->seq, gs->max_held, free_env);
    g->progress_ms = chat_now_ms();
    g->next = gs->head;
    gs->head = g;
    return g;
}

chat_client_err chat_groups_load(chat_groups *gs, const chat_state *st)
{
    for (size_t i = 0; st != NULL && i < chat_state_count(st); i++) {
        uint64_t shown = 0;
        const char *name = chat_state_group(st, i, &shown);
        struct chat_group *g = chat_groups_get(gs, name);
        if (g == NULL)
            return CHAT_CLIENT_ERR_NOMEM;
        chat_seq_set_base(&g->seq, shown);
        g->head = shown;
        g->recorded = shown;
    }
    return CHAT_CLIENT_OK;
}

void chat_groups_free(chat_groups *gs)
{
    while (gs->head != NULL) {
        struct chat_group *g = gs->head;
        gs->head = g->next;
        chat_seq_clear(&g->seq);
        free(g->refusal);
        free(g->name);
        free(g);
    }
}

bool chat_group_behind(const struct chat_group *g)
{
    return g->listening && g->seq.known && (g->seq.n > 0 || g->head > g->seq.shown);
}

void chat_group_raise_head(struct chat_group *g, uint64_t head)
{
    if (head <= g->head)
        return;
    if (!chat_group_behind(g))
        g->progress_ms = chat_now_ms();
    g->head = head;
}

void chat_group_rebase(chat_groups *gs, struct chat_group *g, uint64_t base)
{
    chat_seq_clear(&g->seq);
    chat_seq_init(&g->seq, gs->max_held, free_env);
    chat_seq_set_base(&g->seq, base);
    /* The file's id belongs to the ids before; the server's cursor, base,
     * is where the device is already. */
    g->recorded = base;
}
