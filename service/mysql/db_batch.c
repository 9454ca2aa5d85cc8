/* db_batch.c - db_batch (db.h): a transaction's statements sent in one
 * round trip, its arguments inlined as literals escaped by the server's
 * rules (not prepared), its results read in order. */
#include "db.h"
#include "db_conn.h"

#include "err.h"
#include "log.h"

#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The text of a batch with every '?' replaced by its argument as a literal:
 * integers in decimal, strings quoted and escaped by the server's rules for
 * this connection's character set. Returns the length, or 0 when the text
 * does not fit or the arguments do not match the placeholders. */
static size_t inline_args(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs,
                          char *out, size_t cap)
{
    size_t n = 0;
    int used = 0;
    for (const char *p = sql; *p != '\0'; p++) {
        if (*p != '?') {
            if (n + 1 >= cap)
                return 0;
            out[n++] = *p;
            continue;
        }
        if (used == nargs)
            return 0;
        const struct db_arg *a = &args[used++];
        if (a->type == DB_INT) {
            int w = snprintf(out + n, cap - n, "%lld", a->i);
            if (w < 0 || (size_t)w >= cap - n)
                return 0;
            n += (size_t)w;
        } else if (a->type == DB_NULL) {
            if (n + 5 >= cap)
                return 0;
            memcpy(out + n, "NULL", 4);
            n += 4;
        } else {
            if (n + 2 * a->len + 3 >= cap) /* the escaped worst case and quotes */
                return 0;
            out[n++] = '\'';
            n += mysql_real_escape_string(c->m, out + n, a->s, a->len);
            out[n++] = '\'';
        }
    }
    out[n] = '\0';
    return used == nargs ? n : 0;
}

/* Copies a batch's row into cols, by db_rows' rules: the column count must
 * match and every value must fit its buffer (else TD_EINTERNAL, logged). */
static int batch_row(MYSQL_RES *res, MYSQL_ROW row, const struct db_col *cols, int ncols)
{
    unsigned long *len = mysql_fetch_lengths(res);
    if ((int)mysql_num_fields(res) != ncols) {
        log_error("mysql: a batch's row has %u columns, expected %d", mysql_num_fields(res), ncols);
        return TD_EINTERNAL;
    }
    for (int i = 0; i < ncols; i++) {
        if (cols[i].type == DB_INT) {
            *(int64_t *)cols[i].dst = row[i] != NULL ? strtoll(row[i], NULL, 10) : 0;
            continue;
        }
        size_t n = row[i] != NULL ? len[i] : 0;
        if (n >= cols[i].cap) {
            log_error("mysql: a value of a batch's row does not fit its buffer");
            return TD_EINTERNAL;
        }
        memcpy(cols[i].dst, row[i] != NULL ? row[i] : "", n);
        ((char *)cols[i].dst)[n] = '\0';
    }
    return TD_OK;
}

/* Reads the results of a batch in order. *at is the statement being read. */
static int batch_results(struct db_conn *c, int last, int row_at, const struct db_col *cols,
                         int ncols, bool *got_row, int *at)
{
    int more;
    int rc = TD_OK;
    bool lost = false;
    *at = 0;
    do {
        MYSQL_RES *res = mysql_store_result(c->m);
        if (res != NULL) {
            MYSQL_ROW row = mysql_fetch_row(res);
            if (*at == row_at && row != NULL && rc == TD_OK) {
                rc = batch_row(res, row, cols, ncols);
                *got_row = rc == TD_OK;
            }
            mysql_free_result(res);
        } else if (mysql_field_count(c->m) != 0) {
            return db_fail(c, mysql_errno(c->m), mysql_error(c->m), "batch result");
        }
        /* Every statement between START TRANSACTION and COMMIT must end
         * inside the transaction (see lost_by_server). */
        if (*at > 0 && *at < last && !db_server_in_tx(c))
            lost = true;
        more = mysql_next_result(c->m);
        if (more > 0) {
            ++*at;
            /* 1213 at the COMMIT is a Galera certification conflict. */
            return db_fail(c, mysql_errno(c->m), mysql_error(c->m),
                           *at == last ? "COMMIT" : "batch");
        }
        if (more == 0)
            ++*at;
    } while (more == 0);
    if (rc != TD_OK)
        return rc; /* every result read: the connection stays in step */
    if (lost) {
        /* Its statements may have run one by one, outside the transaction:
         * what holds now is for the database to say (the caller's retry
         * finds the order by its unique key, or makes it). */
        log_error("mysql: the server rolled a batch's transaction back without an error "
                  "(a Galera conflict); answering unavailable");
        return TD_EUNAVAIL;
    }
    return TD_OK;
}

static int batch_once(struct db_conn *c, const char *text, size_t len, int last, int row_at,
                      const struct db_col *cols, int ncols, bool *got_row, int *at)
{
    *got_row = false;
    *at = 0;
    if (c->m == NULL)
        return TD_EUNAVAIL;
    /* Until its first statement (START TRANSACTION) answers, a failing
     * link may just be stale, as for db_begin; from then on the batch is
     * inside a transaction, a link lost is the server's trouble, and an
     * error leaves the transaction to be rolled back. */
    c->in_tx = false;
    if (mysql_real_query(c->m, text, len) != 0)
        return db_fail(c, mysql_errno(c->m), mysql_error(c->m), "batch");
    c->in_tx = true;
    return batch_results(c, last, row_at, cols, ncols, got_row, at);
}

int db_batch(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs, int row_at,
             const struct db_col *cols, int ncols)
{
    char text[DB_BATCH_MAX];
    bool got_row;
    int at;
    if (c->m == NULL)
        return TD_EUNAVAIL;
    size_t len = inline_args(c, sql, args, nargs, text, sizeof text);
    if (len == 0) {
        log_error("mysql: a batch does not fit %d bytes or its arguments", DB_BATCH_MAX);
        return TD_EINTERNAL;
    }
    int last = 0; /* the index of the final COMMIT: statements are split by ';' */
    for (const char *p = sql; *p != '\0'; p++)
        last += *p == ';';
    bool was_fresh = c->fresh;
    int rc = batch_once(c, text, len, last, row_at, cols, ncols, &got_row, &at);
    /* A stale link fails at the first statement, before anything ran. If
     * the batch did commit and only its answer was lost, running it again
     * meets the unique index, which the caller reads as "already done". */
    if (at == 0 && db_redial_stale(c, rc, was_fresh))
        rc = batch_once(c, text, len, last, row_at, cols, ncols, &got_row, &at);
    c->fresh = false;
    if (rc != TD_OK) {
        db_rollback(c); /* the statement that failed left the transaction open */
        return rc;
    }
    c->in_tx = false; /* the batch ended with its COMMIT */
    return got_row ? TD_OK : TD_ENOTFOUND;
}
