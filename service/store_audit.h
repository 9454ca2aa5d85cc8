/* store_audit.h - the invariants ticketd promises, checked over the whole
 * database for GET /api/v1/admin/audit. Each check is one SQL statement,
 * so it reads one consistent snapshot even while orders are being placed.
 *
 * Implemented by store_audit.c on MariaDB/MySQL. Thread-safe. */
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

/* Runs every check, in a fixed order, into out (AUDIT_MAX_CHECKS slots);
 * *n is how many. A failed check is a result, not an error: returns TD_OK
 * unless the database could not be asked (TD_EUNAVAIL, TD_EINTERNAL ...). */
int store_audit(struct audit_check *out, int *n);

#endif
