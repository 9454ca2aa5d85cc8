/* fake_keys.h - link-time fakes of the key look-up's read-only ports
 * (cache_idem_peek of cache.h, store_order_peek_request of store.h), in
 * fake_keys.c.
 *
 * Each call logs itself in fake_calls ("idem_peek", "order_peek") and
 * answers the knobs below; fake_keys_reset() makes them "nothing under the
 * key" (Redis answers with no records, the database has no order). */
#ifndef TICKETD_TEST_FAKE_KEYS_H
#define TICKETD_TEST_FAKE_KEYS_H

#include "fakes.h"

#include <stdint.h>

struct fake_keys {
    int peek_rc;                  /* cache_idem_peek's answer */
    char records[2][FAKE_RECORD]; /* "" : no record under that name */
    int64_t ttl_ms[2];
    int order_rc; /* store_order_peek_request's; TD_OK hands back order */
    struct order order;

    /* Recorded: the names of the last peek, the key of the last read. */
    char names[2][FAKE_STR];
    char request_id[FAKE_STR];
};

extern struct fake_keys fake_keys;
void fake_keys_reset(void);

#endif
