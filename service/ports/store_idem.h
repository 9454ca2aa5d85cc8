/* store_idem.h - the database port of the durable idempotency records
 * (table idempotency_records, sql/007): the answer given under a key whose
 * request is not one business row, such as a cart's batch key.
 *
 * Implemented on MariaDB/MySQL by idem_mysql.c. Errors as in store.h.
 * Connections as in store.h: a fiber's borrowed one, a thread's own. */
#ifndef TICKETD_STORE_IDEM_H
#define TICKETD_STORE_IDEM_H

#include "idem.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest answer a record keeps. */
#define STORE_IDEM_BODY_MAX 65536

struct idem_stored {
    char fingerprint[IDEM_FP_LEN + 1];
    bool complete;
    int status;
    char *body; /* new, caller frees (idem_stored_cleanup) */
    size_t body_len;
    char day[16]; /* created_day, YYYY-MM-DD: the row's place in the key */
};

void idem_stored_cleanup(struct idem_stored *st);

/* The newest record of (scope, user, key) into *out (cleared on entry).
 * The read locks nothing and waits for nothing. TD_ENOTFOUND when there
 * is none. */
int store_idem_find(const char *scope, int64_t user_id, const char *key, struct idem_stored *out);

/* Writes the answer under (scope, user, key) on day (a record's own day
 * from store_idem_find, or NULL for today, UTC). An existing row is
 * replaced only when it holds the same fingerprint and is not complete
 * yet: a final answer is never overwritten, and a copy with another
 * payload that got this far cannot take the key over. */
int store_idem_put(const char *scope, int64_t user_id, const char *key, const char *day,
                   const char *fingerprint, bool complete, int status, const char *body,
                   size_t body_len);

#endif
