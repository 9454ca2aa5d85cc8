/* fake_lifecycle.h - a link-time fake of store_lifecycle.h, in
 * fake_store_lifecycle.c, for lifecycle.c's unit test:
 *
 *   - store_order_change answers rc[i] on its i-th call (the last one
 *     repeating; nrc 0: TD_OK), or special_rc[j] for the order id
 *     special_id[j]. On TD_OK the order is moved (changed) unless
 *     `unchanged` says it was in the target state already; on
 *     TD_ECONFLICT it is answered PAID;
 *   - store_orders_unpaid_older lists the ids 1..unpaid above after_id.
 *
 * It records the last change asked for and counts the calls. */
#ifndef TICKETD_TEST_FAKE_LIFECYCLE_H
#define TICKETD_TEST_FAKE_LIFECYCLE_H

#include "fakes.h"
#include "store_lifecycle.h"

struct fake_lifecycle {
    int rc[FAKE_TRIES];
    int nrc;
    int64_t special_id[FAKE_TRIES];
    int special_rc[FAKE_TRIES];
    int nspecial;
    bool unchanged;
    int64_t unpaid;
    int scan_rc;

    int changes;
    int moved;
    struct order_change last;
    char order_no[FAKE_STR];
    int scans;
    int64_t age_s;
};

extern struct fake_lifecycle fake_lifecycle;
void fake_lifecycle_reset(void);

#endif
