/* merge_batch.h - the pure part of placing new orders (store_merge.h): the
 * text of the one round trip that places a batch of them, and the reading
 * of each order's outcome from its answer.
 *
 * A batch of orders is one transaction in one statement, answered in one
 * reply (a batch of one takes the plain one-order text instead,
 * place_in_one_trip in store_mysql.c, which decides the same way for half
 * the server's CPU):
 *
 *   CALL place_batch('[{"n": order_no, "u": user, "s": session, "r": request,
 *                      "q": quantity, "c": created_at, "t": token, "m": 1}, ...]')
 *
 * place_batch (sql/015_place_batch.sql) begins the transaction, calls
 * place_orders, commits, and then returns the outcomes as its one result
 * set. The database decides every order (sql/013_place_orders.sql): its INSERT
 * under the unique key (user_id, request_id), its token's unique row, then
 * the stock compare-and-set under CHECK (stock >= 0), each refusal caught
 * for that order alone. No row lock is held across a client round trip, and
 * nothing is decided in the process but what the answer says.
 *
 * The answer is one outcome per order, "<i> P <id> <amount>," for an order
 * placed and "<i> X," for one refused (i counts from 1; X: D the key has an
 * order, R the random order number collided, N no such session, S sold out,
 * T the token was spent; L its session's row, K its key's or token's row,
 * held by another transaction past the lock wait:
 * sql/014_place_orders_lock_wait.sql).
 *
 * Not shared: a plan belongs to whoever builds it (a loop's flush of its
 * due orders, store_merge.c) until it is run. */
#ifndef TICKETD_MERGE_BATCH_H
#define TICKETD_MERGE_BATCH_H

#include "db.h"
#include "model.h"
#include "store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest batch TICKETD_MERGE_MAX may ask for. */
#define MERGE_MAX_LIMIT 256

/* An order's outcome that says "place me alone": a later copy of a key
 * whose earlier copy in the same batch was not placed (sold out, no such
 * session, token spent), so that no order of this key exists to replay; or
 * an order whose key's row another transaction held past the lock wait
 * ('K'). Alone, it gets an answer of its own. The same value as
 * STORE_MERGE_ALONE (store_merge.h). */
#define MERGE_ALONE 1

/* An order's outcome that says "a row lock it needed was held by another
 * transaction past the lock wait" ('L'): nothing of it was kept, and its
 * session's row is likely held still. The same value as STORE_MERGE_HELD
 * (store_merge.h). */
#define MERGE_LOCKED 2

/* One order of a batch. The caller fills d and db_now; the outcome is
 * rc (a store_order_create answer, MERGE_ALONE or MERGE_LOCKED) and, when
 * TD_OK, id and amount. */
struct merge_order {
    const struct order_draft *d;
    const char *db_now;
    int rc;
    int64_t id, amount;
    bool settled; /* the answer named it */
};

struct merge_plan {
    struct merge_order **orders;
    int n;
    /* The text (with '?' placeholders) and its one argument, the orders
     * as JSON, owned. */
    char *sql;
    char *json;
    struct db_arg arg;
    unsigned how;    /* db_batch_each's DB_BATCH_* flags for the text */
    int outcomes_at; /* the statement whose row holds the outcomes */
    int bad_rows;    /* answers that could not be read */
};

/* Plans a batch of n orders (1 <= n <= MERGE_MAX_LIMIT; the orders stay
 * the caller's and are borrowed until merge_plan_free). With open the text
 * stops before its COMMIT (the caller commits). Every order starts
 * unsettled. */
void merge_plan_init(struct merge_plan *p, struct merge_order **orders, int n, bool open);

void merge_plan_free(struct merge_plan *p);

/* Takes one row of the answer (statement at, as db_batch_each reports it)
 * into the plan. Always TD_OK: the COMMIT runs on the server whatever the
 * process thinks of a row, so a row it cannot read must not fail orders
 * that committed. It is counted in bad_rows, and merge_plan_done settles
 * what it should have said. */
int merge_plan_row(struct merge_plan *p, int at, const struct db_batch_row *row);

/* After the transaction committed: every order the answer did not settle
 * gets TD_EUNAVAIL (its outcome is unknown; the client's retry finds its
 * order by the unique key, or makes it), and a duplicate whose earlier
 * copy in the batch was not placed gets MERGE_ALONE. Returns the orders
 * left unsettled. */
int merge_plan_done(struct merge_plan *p);

/* Places the k orders (1 <= k <= MERGE_MAX_LIMIT) as one transaction on c,
 * in one round trip (the plan above), and commits: TD_OK with each order's
 * outcome in it, or the transaction's error (nothing of it was kept, or,
 * TD_EUNAVAIL, it is unknown whether it was). */
int merge_batch_run(struct db_conn *c, struct merge_order **orders, int k);

/* The outcome string of one order, parsed: for the unit tests and
 * merge_plan_row. Returns the characters read, 0 when s does not start
 * with a well-formed outcome. */
size_t merge_outcome_parse(const char *s, size_t len, int *index, char *code, int64_t *id,
                           int64_t *amount);

#endif
