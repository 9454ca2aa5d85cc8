/* fake_api.h - link-time fakes of the database ports only the API layer
 * reaches besides those of fakes.h, in fake_store_api.c: the durable
 * idempotency records of a cart (store_idem.h), the audit (store_audit.h)
 * and a user's points (store_user_points of store_events.h).
 *
 * Each call logs itself in fake_calls ("idem_find", "idem_put", "audit",
 * "user_points") and answers the knobs below; fake_api_reset() makes them
 * "all is well" (no record under a key, every audit check passing). */
#ifndef TICKETD_TEST_FAKE_API_H
#define TICKETD_TEST_FAKE_API_H

#include "fakes.h"

#include <stdbool.h>
#include <stdint.h>

struct fake_api {
    int idem_find_rc; /* TD_ENOTFOUND after reset */
    /* What store_idem_find hands back with TD_OK: the record's status and
     * whether it is final. Recorded: the scope and key of the last find. */
    int idem_status;
    bool idem_complete;
    char idem_scope[FAKE_STR];
    char idem_key[FAKE_STR];
    int idem_put_rc;
    int audit_rc;
    int points_rc;
    int64_t points;

    /* Recorded: the scope of the last audit. */
    char audit_scope[FAKE_STR];
};

extern struct fake_api fake_api;
void fake_api_reset(void);

#endif
