/* store_naive.c - the switch of the adapters' defences, and the naive order
 * transition the articles warn about (store_naive.h, store_tx.h). */
#include "store_naive.h"

#include "db.h"
#include "defenses.h"
#include "err.h"
#include "faults.h"
#include "store_tx.h"

static unsigned defenses_on = DEFENSES_ALL;

void store_set_defenses(unsigned on)
{
    defenses_on = on;
}

bool store_defense_on(unsigned bit)
{
    return (defenses_on & bit) != 0;
}

/* Read-modify-write: the status was read (without a lock) and checked
 * against the state machine by the caller's process; the write trusts that
 * reading and names only the row. Two transitions that read the same
 * status both write, and the last one wins. */
static const char sql_rmw[] =
    "UPDATE orders SET status = ?, version = version + 1, updated_at = ? WHERE id = ?";

/* The history row takes whatever version the row has now, as code that
 * never compares versions would: a second writer then records a version
 * of its own instead of colliding with the first on (order_id, version). */
static const char sql_history[] =
    "INSERT INTO order_history (order_id, from_status, to_status, version, cause, created_at) "
    "SELECT id, ?, ?, version, ?, ? FROM orders WHERE id = ?";

int store_tx_move(struct db_conn *c, const struct order *o, enum order_event ev)
{
    if (store_defense_on(DEFENSE_STATE_CAS))
        return store_tx_transition(c, o, ev);
    /* DEMO ONLY (state-cas switched off). */
    char db_now[32], api_now[TIME_LEN + 1];
    enum order_status to;
    if (!statemachine_next(o->status, ev, &to))
        return TD_ECONFLICT;
    store_now(db_now, api_now);
    struct db_arg set[] = {DB_S(order_status_name(to)), DB_S(db_now), DB_I(o->id)};
    int rc = db_exec(c, sql_rmw, set, 3, NULL, NULL);
    if (rc != TD_OK)
        return rc;
    struct db_arg hist[] = {DB_S(order_status_name(o->status)), DB_S(order_status_name(to)),
                            DB_S(order_event_name(ev)), DB_S(db_now), DB_I(o->id)};
    return db_exec(c, sql_history, hist, 5, NULL, NULL);
}

int store_tx_read_for_move(struct db_conn *c, const char *locking, const char *plain,
                           const struct db_arg *args, int nargs, struct order *out)
{
    int rc =
        store_tx_order(c, store_defense_on(DEFENSE_STATE_CAS) ? locking : plain, args, nargs, out);
    /* The test build can widen the time between reading the order and
     * writing it (delay), in both versions: under the row lock a second
     * transition waits for the first; without it both go ahead. */
    if (rc == TD_OK)
        (void)FAULT_POINT("order.before_transition");
    return rc;
}
