/* db_errors.c - what MariaDB's error numbers mean to ticketd (db_conn.h):
 * a refusal by a key or a constraint, a conflict worth running again, a
 * partition another instance made first, a link that failed. Apart from
 * db.c, which acts on the verdict (drops the link, opens the breaker):
 * these only read a number and its message. */
#include "db_conn.h"

#include "err.h"
#include "txretry.h"

#include <errmsg.h>
#include <mysqld_error.h>
#include <string.h>

bool db_link_error(unsigned int e)
{
    /* Client-side errors (2000-2999) are all about the link: gone, lost,
     * refused, timed out, out of sync. On the server side, shutdown and
     * killed connections mean the same for us. */
    return (e >= CR_MIN_ERROR && e <= CR_MAX_ERROR) || e == ER_SERVER_SHUTDOWN ||
           e == ER_CONNECTION_KILLED || e == ER_QUERY_INTERRUPTED || e == 4031 /* idle timeout */ ||
           /* A Galera node that is not (yet, or no longer) part of the
            * primary component answers 1047 "WSREP has not yet prepared node
            * for application use": unavailable, as a server still starting. */
           e == ER_UNKNOWN_COM_ERROR;
}

/* Remembers the name that starts at k and ends at the next quote (or at
 * the end of the text) in c->dup_key, cut to fit; "" when k is NULL. */
static void remember_name(struct db_conn *c, const char *k, char quote)
{
    const char stop[] = {quote, '\0'};
    size_t n = k != NULL ? strcspn(k, stop) : 0;
    if (n >= sizeof c->dup_key)
        n = sizeof c->dup_key - 1;
    memcpy(c->dup_key, k != NULL ? k : "", n);
    c->dup_key[n] = '\0';
}

int db_refusal(struct db_conn *c, unsigned int e, const char *msg)
{
    if (e == ER_DUP_ENTRY) {
        /* "Duplicate entry 'x' for key 'name'": remember which key. */
        const char *k = strstr(msg, "for key '");
        if (k != NULL) {
            k += 9;
            /* MySQL 8 says 'table.key' */
            const char *dot = memchr(k, '.', strcspn(k, "'"));
            if (dot != NULL)
                k = dot + 1;
        }
        remember_name(c, k, '\'');
        return TD_EDUP;
    }
    if (e == ER_BAD_NULL_ERROR) {
        /* "Column 'name' cannot be null": a value the statement looked up
         * was not there (TD_ENOTFOUND), the column's name remembered. The
         * one-order text relies on it (store_mysql.c): a price of no
         * session, or an in-transaction guard that refused a write. */
        const char *k = strchr(msg, '\'');
        remember_name(c, k != NULL ? k + 1 : NULL, '\'');
        return TD_ENOTFOUND;
    }
    if (e == ER_CONSTRAINT_FAILED) {
        /* "CONSTRAINT `name` failed for ...": a CHECK refused the row. */
        const char *k = strchr(msg, '`');
        remember_name(c, k != NULL ? k + 1 : NULL, '`');
        return TD_ECONFLICT;
    }
    return 0;
}

bool db_conflict(unsigned int e, const char *what)
{
    /* 1467, "Failed to read auto-increment value from storage engine", is
     * how MariaDB reports a deadlock whose victim waited for a table's
     * auto-increment lock (an INSERT ... SELECT holds it for the whole
     * statement): the transaction was rolled back like any deadlock's. */
    if (e != ER_LOCK_DEADLOCK && e != ER_LOCK_WAIT_TIMEOUT && e != ER_AUTOINC_READ_FAILED)
        return false;
    /* Which conflict, for the retries metric. Galera reports a failed
     * certification as 1213 too, and only at COMMIT: the writeset of a
     * transaction is certified against the other nodes' when it commits.
     * A local InnoDB deadlock cannot happen at COMMIT (COMMIT takes no row
     * locks; on a single server 1213 comes from a statement that waited
     * for a lock). So 1213 at COMMIT is a certification conflict, 1213 at
     * a statement a deadlock. A local transaction aborted by a replicated
     * writeset while it was still running (a Galera "brute force" abort)
     * fails at its next statement and is counted as a deadlock: it is one,
     * with a transaction of another node, and is retried all the same. */
    if (e == ER_LOCK_WAIT_TIMEOUT)
        txretry_note(TXRETRY_LOCK_WAIT);
    else if (strcmp(what, "COMMIT") == 0)
        txretry_note(TXRETRY_CERTIFICATION);
    else
        txretry_note(TXRETRY_DEADLOCK);
    return true;
}

bool db_partition_race(unsigned int e)
{
    return e == ER_SAME_NAME_PARTITION || e == ER_PARTITION_DOES_NOT_EXIST ||
           e == ER_REORG_PARTITION_NOT_EXIST;
}
