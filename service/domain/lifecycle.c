/* lifecycle.c - an order's transitions after its creation (lifecycle.h):
 * the user's cancel, the admin's complete and the expiry sweep, each one
 * state-machine step applied by the store's compare-and-set on status and
 * version. Apart from payments.c, whose transition comes with a payment
 * row and its own deduplication by transaction id. */
#include "lifecycle.h"

#include "app.h"
#include "err.h"
#include "log.h"
#include "metrics.h"
#include "statemachine.h"
#include "store_lifecycle.h"
#include "txretry.h"

#include <string.h>

#define SWEEP_BATCH 100

/* The state an event leads to, from whichever state allows it. */
static enum order_status target_of(enum order_event ev)
{
    enum order_status to = ORDER_STATUS_COUNT;
    for (int s = 0; s < ORDER_STATUS_COUNT; s++) {
        if (statemachine_next((enum order_status)s, ev, &to))
            break;
    }
    return to;
}

struct change_run {
    struct order_change ch;
    struct order *out;
    bool changed;
};

static int change_once(void *p)
{
    struct change_run *r = p;
    return store_order_change(&r->ch, r->out, &r->changed);
}

/* Applies ev under the rules of lifecycle.h. */
static int change(struct app *app, struct change_run *r, enum order_event ev)
{
    r->ch.event = ev;
    r->ch.done = target_of(ev);
    /* Seats are held by every order that is not cancelled (the audit's
     * stock_conservation): entering CANCELLED is what releases them. */
    r->ch.give_back_stock = r->ch.done == ORDER_CANCELLED;
    return txretry_run(app->cfg->tx_retries, change_once, r);
}

int lifecycle_cancel(struct app *app, const char *order_no, int64_t user_id, struct order *out)
{
    struct change_run r = {.ch = {.order_no = order_no, .user_id = user_id}, .out = out};
    int rc = change(app, &r, EVENT_CANCEL);
    if (rc == TD_OK && r.changed)
        metrics_inc(M_ORDERS_CANCELLED);
    return rc;
}

int lifecycle_complete(struct app *app, const char *order_no, struct order *out)
{
    struct change_run r = {.ch = {.order_no = order_no}, .out = out};
    return change(app, &r, EVENT_COMPLETE);
}

/* Expires one order, unless it was paid, cancelled or taken meanwhile. */
static int expire_one(struct app *app, int64_t id, bool *expired)
{
    struct order o;
    struct change_run r = {.ch = {.order_id = id, .skip_locked = true}, .out = &o};
    *expired = false;
    int rc = change(app, &r, EVENT_EXPIRE);
    if (rc == TD_ENOTFOUND || rc == TD_ECONFLICT)
        return TD_OK; /* held by another transaction, or paid first: not ours */
    if (rc == TD_OK && r.changed) {
        *expired = true;
        metrics_inc(M_ORDERS_EXPIRED);
        log_debug("order %s expired unpaid; %lld seats back to session %lld", o.order_no,
                  (long long)o.quantity, (long long)o.session_id);
    }
    return rc;
}

int lifecycle_sweep(struct app *app, const _Atomic bool *stop, int *expired)
{
    int64_t ids[SWEEP_BATCH];
    int64_t after = 0;
    int n = 0, rc = TD_OK;
    *expired = 0;
    do {
        rc = store_orders_unpaid_older(app->cfg->order_ttl_s, after, SWEEP_BATCH, ids, &n);
        if (rc != TD_OK)
            break;
        for (int i = 0; i < n && !atomic_load(stop); i++) {
            bool done;
            rc = expire_one(app, ids[i], &done);
            if (rc != TD_OK)
                return rc;
            *expired += done;
            after = ids[i];
        }
    } while (n == SWEEP_BATCH && !atomic_load(stop));
    return rc;
}
