/* consume.c - the consumers' effects of order.paid (consume.h). */
#include "consume.h"

#include "err.h"
#include "store_events.h"
#include "txretry.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

static int apply_points(const struct paid_event *pe, const char *dedup_key, int64_t redrive_id)
{
    return store_points_credit(dedup_key, pe->order_no, pe->user_id,
                               consume_points_for(pe->amount_cents), redrive_id);
}

static int apply_ticketing(const struct paid_event *pe, const char *dedup_key, int64_t redrive_id)
{
    return store_ticket_issue(dedup_key, pe->order_no, redrive_id);
}

const struct consume_group consume_groups[CONSUME_GROUPS] = {
    {EVENTS_GROUP_POINTS, M_EVENTS_CONSUMED_POINTS, M_EVENTS_DUPLICATE_POINTS, apply_points},
    {EVENTS_GROUP_TICKETING, M_EVENTS_CONSUMED_TICKETING, M_EVENTS_DUPLICATE_TICKETING,
     apply_ticketing},
};

const struct consume_group *consume_group_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < CONSUME_GROUPS; i++) {
        if (strcmp(consume_groups[i].name, name) == 0)
            return &consume_groups[i];
    }
    return NULL;
}

char *consume_dedup_key(const struct consume_group *g, const char *biz_key)
{
    return xasprintf("%s:%s", g->name, biz_key != NULL ? biz_key : "");
}

/* One attempt at a group's effect, for txretry_run. */
struct attempt {
    const struct consume_group *g;
    const struct paid_event *pe;
    const char *dedup_key;
    int64_t redrive_id;
};

static int attempt_once(void *p)
{
    const struct attempt *a = p;
    return a->g->apply(a->pe, a->dedup_key, a->redrive_id);
}

int consume_apply(const struct consume_group *g, const struct paid_event *pe, const char *dedup_key,
                  int64_t redrive_id, int retries)
{
    struct attempt at = {g, pe, dedup_key, redrive_id};
    return txretry_run(retries, attempt_once, &at);
}

const char *consume_unfit_reason(int rc)
{
    switch (rc) {
    case TD_ENOTFOUND:
        return "no such order";
    case TD_ECONFLICT:
        return "the order's state does not allow it";
    default:
        return NULL;
    }
}
