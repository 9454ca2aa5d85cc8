/* merge_turn.c - the server's turn over the loops (merge_turn.h). */
#include "merge_turn.h"

#include "metrics.h"

#include <pthread.h>
#include <stddef.h>

static struct {
    pthread_mutex_t mu;
    int at_server;                         /* batches at the server now */
    struct merge_turn_place *first, *last; /* the line */
} turn = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Under turn.mu. */
static void line_remove(struct merge_turn_place *p)
{
    struct merge_turn_place **at = &turn.first, *prev = NULL;
    while (*at != NULL && *at != p) {
        prev = *at;
        at = &(*at)->next;
    }
    if (*at == NULL)
        return;
    *at = p->next;
    if (turn.last == p)
        turn.last = prev;
    p->next = NULL;
    p->in_line = false;
}

/* Under turn.mu. */
static void line_append(struct merge_turn_place *p)
{
    if (p->in_line)
        return;
    p->in_line = true;
    p->line_since_ms = loop_now_ms();
    p->next = NULL;
    if (turn.last != NULL)
        turn.last->next = p;
    else
        turn.first = p;
    turn.last = p;
}

/* MERGE_TURN_WAIT_MAX_MS in line: the batch at the server is held up (a
 * row lock), and this loop's batch goes beside it. The timer runs from the
 * place's first time in line; a place taken out of the line meanwhile
 * (another loop's batch took its orders) and back in it since has waited
 * only from its return, and the timer is set again for the rest. */
static void net_passed(void *arg)
{
    struct merge_turn_place *p = arg;
    bool go = false;
    int64_t rest = 0;
    pthread_mutex_lock(&turn.mu);
    if (p->in_line) {
        rest = p->line_since_ms + MERGE_TURN_WAIT_MAX_MS - loop_now_ms();
        if (rest <= 0) {
            line_remove(p);
            metrics_inc(M_ORDER_BATCHES_BESIDE);
            turn.at_server++;
            p->has_turn = true;
            go = true;
        }
    }
    pthread_mutex_unlock(&turn.mu);
    if (go)
        p->go(p->arg);
    else if (rest > 0)
        loop_timer_start(p->loop, &p->net, (int)rest, net_passed, p);
}

bool merge_turn_take(struct merge_turn_place *p, bool full)
{
    bool go = true;
    pthread_mutex_lock(&turn.mu);
    if (p->has_turn) {
        p->has_turn = false;
    } else if (turn.at_server == 0 || full) {
        if (turn.at_server > 0)
            metrics_inc(M_ORDER_BATCHES_BESIDE);
        turn.at_server++;
        line_remove(p);
    } else {
        line_append(p);
        go = false;
    }
    pthread_mutex_unlock(&turn.mu);
    if (go)
        loop_timer_stop(p->loop, &p->net);
    else if (p->net.heap_at == 0)
        loop_timer_start(p->loop, &p->net, MERGE_TURN_WAIT_MAX_MS, net_passed, p);
    return go;
}

void merge_turn_leave(struct merge_turn_place *p)
{
    pthread_mutex_lock(&turn.mu);
    line_remove(p);
    pthread_mutex_unlock(&turn.mu);
}

bool merge_turn_handed(struct merge_turn_place *p)
{
    pthread_mutex_lock(&turn.mu);
    bool handed = p->has_turn;
    pthread_mutex_unlock(&turn.mu);
    return handed;
}

void merge_turn_keep(struct merge_turn_place *p)
{
    pthread_mutex_lock(&turn.mu);
    line_remove(p);
    if (turn.first != NULL)
        metrics_inc(M_ORDER_BATCH_TURNS_KEPT); /* where the turn used to be handed over */
    p->has_turn = true;
    pthread_mutex_unlock(&turn.mu);
}

static void handed(void *arg)
{
    struct merge_turn_place *p = arg;
    loop_timer_stop(p->loop, &p->net);
    p->go(p->arg);
}

void merge_turn_give(void)
{
    pthread_mutex_lock(&turn.mu);
    struct merge_turn_place *p = turn.first;
    if (p != NULL) {
        line_remove(p);
        p->has_turn = true;
        metrics_inc(M_ORDER_BATCH_TURNS_HANDED);
    } else {
        turn.at_server--;
    }
    pthread_mutex_unlock(&turn.mu);
    if (p != NULL)
        loop_post(p->loop, handed, p);
}
