/* store_audit.h - the invariants ticketd promises, checked over the whole
 * database (or over some sessions) for GET /api/v1/admin/audit. Each check
 * is one SQL statement, so it reads one consistent snapshot even while
 * orders are being placed.
 *
 * Implemented by audit_mysql.c on MariaDB/MySQL. Thread-safe. */
#ifndef TICKETD_STORE_AUDIT_H
#define TICKETD_STORE_AUDIT_H

#include <stdbool.h>

#define AUDIT_MAX_CHECKS  12
#define AUDIT_DETAIL_SIZE 256

struct audit_check {
    const char *name; /* static: "stock_conservation", ... */
    bool ok;
    char detail[AUDIT_DETAIL_SIZE];
};

/* The most sessions one scoped audit names, and the room their ids take
 * as text ("12,13,...": up to 19 digits and a comma each). */
#define AUDIT_SCOPE_MAX  256
#define AUDIT_SCOPE_SIZE (AUDIT_SCOPE_MAX * 20 + 1)

/* Runs every check, in a fixed order, into out (AUDIT_MAX_CHECKS slots);
 * *n is how many. scope is "" for the whole database, or session ids
 * joined by commas ("12,13"): then each check looks only at those
 * sessions, their orders and payments, and the users who ordered on them.
 * A failed check is a result, not an error: returns TD_OK unless the
 * database could not be asked (TD_EUNAVAIL, TD_EINTERNAL ...). */
int store_audit(const char *scope, struct audit_check *out, int *n);

#endif
