/* db_tx.c - a transaction's beginning and end on a connection (db.h:
 * db_tx_begin, db_tx_end): START TRANSACTION repeated once on a link found
 * stale, COMMIT refused when the server has already dropped the
 * transaction. Apart from db.c, which owns the connections and their
 * errors; ROLLBACK stays there, since a connection given back inside a
 * transaction is rolled back on its way to the pool. */
#include "db.h"
#include "db_conn.h"

#include "err.h"
#include "log.h"
#include "txretry.h"

#include <mysql.h>
#include <string.h>

static int simple(struct db_conn *c, const char *q)
{
    if (c->m == NULL)
        return TD_EUNAVAIL;
    if (db_query(c, q, strlen(q)) != 0)
        return db_fail(c, mysql_errno(c->m), mysql_error(c->m), q);
    return TD_OK;
}

int db_begin(struct db_conn *c)
{
    bool was_fresh = c->fresh;
    int rc = simple(c, "START TRANSACTION");
    if (db_redial_stale(c, rc, was_fresh))
        rc = simple(c, "START TRANSACTION");
    c->fresh = false;
    c->in_tx = rc == TD_OK;
    return rc;
}

bool db_server_in_tx(struct db_conn *c)
{
    unsigned int status = 0;
    if (c->m == NULL || mariadb_get_infov(c->m, MARIADB_CONNECTION_SERVER_STATUS, &status) != 0)
        return true; /* cannot tell: let COMMIT speak */
    return (status & SERVER_STATUS_IN_TRANS) != 0;
}

/* A Galera node rolls back a local transaction whose rows a replicated
 * write needs (a "brute force" abort). The transaction's next statement
 * should then fail with 1213; measured on a three-node cluster here, it
 * sometimes ran instead, outside any transaction, and the COMMIT that
 * followed answered OK having committed nothing: an answer that would
 * claim a cancel the database never kept. The server's own status flag
 * says so before COMMIT is sent: the transaction is run again, as after
 * any certification conflict. */
static bool lost_by_server(struct db_conn *c, const char *what)
{
    if (db_server_in_tx(c))
        return false;
    log_warn("mysql: %s: the server rolled the transaction back without an error (a Galera "
             "conflict); running it again",
             what);
    txretry_note(TXRETRY_CERTIFICATION);
    return true;
}

int db_commit(struct db_conn *c)
{
    if (c->in_tx && lost_by_server(c, "before COMMIT")) {
        c->in_tx = false;
        return TD_ERETRY;
    }
    /* Still "in a transaction" while COMMIT runs: a link lost now is the
     * server's trouble, not a stale connection. */
    int rc = simple(c, "COMMIT");
    c->in_tx = false;
    return rc;
}

int db_tx_begin(struct db_conn **out)
{
    struct db_conn *c;
    *out = NULL;
    int rc = db_conn_get(&c);
    if (rc == TD_OK)
        rc = db_begin(c);
    if (rc == TD_OK)
        *out = c;
    return rc;
}

int db_tx_end(struct db_conn *c, int rc)
{
    if (rc == TD_OK)
        rc = db_commit(c);
    /* After a failed COMMIT too: the server may still hold the
     * transaction open when only the answer was lost. */
    if (rc != TD_OK)
        db_rollback(c);
    return rc;
}
