/* store_naive.h - the demo's naive store: the transaction steps the
 * articles warn about, as entries of the MySQL adapters' step table
 * (store_mysql.h) that replace the real ones. boot.c puts one in the table
 * at boot for each defence TICKETD_DEFENSES switches off (TICKETD_ENV=demo
 * only); they read no switch themselves. Each is a whole implementation of
 * its step, with its race. */
#ifndef TICKETD_STORE_NAIVE_H
#define TICKETD_STORE_NAIVE_H

#include "store_mysql.h"

/* order_place, step by step in one transaction, instead of the one round
 * trip that trusts the unique index and the stock's CHECK:
 *   look_first   (unique-index off) looks for the key, then inserts: a copy
 *                that looks between the two finds nothing too;
 *   read_stock   (stock-cas off) reads the stock, then writes back what it
 *                read minus the quantity: two buyers of the last seat both
 *                pass;
 *   both         both at once. */
int store_naive_place_look_first(struct db_conn *c, const struct order_draft *d, const char *db_now,
                                 int64_t *id, int64_t *amount);
int store_naive_place_read_stock(struct db_conn *c, const struct order_draft *d, const char *db_now,
                                 int64_t *id, int64_t *amount);
int store_naive_place_both(struct db_conn *c, const struct order_draft *d, const char *db_now,
                           int64_t *id, int64_t *amount);

/* read_for_move and move with state-cas off: the status read without a
 * lock, then an UPDATE naming only the row's id, trusting that reading. */
int store_naive_read_plain(struct db_conn *c, const char *locking, const char *plain,
                           const struct db_arg *args, int nargs, struct order *out);
int store_naive_move_blind(struct db_conn *c, const struct order *o, enum order_event ev);

/* consume with consumer-dedup-same-tx off: the dedup row committed in a
 * transaction of its own before the effect's (a re-drive keeps the real
 * step: its letter's stamp needs the row in its transaction). */
int store_naive_consume_apart(const char *consumer, const char *dedup_key, int64_t redrive_id,
                              store_effect_fn effect, const void *ctx);

/* points_ledger with no ledger behind the dedup rows: records nothing, so
 * a credit is refused only by its dedup row. */
int store_naive_no_ledger(struct db_conn *c, const char *order_no, int64_t user_id, int64_t points,
                          const char *db_now);

#endif
