/* db_batch.c - db_batch (db.h): a transaction's statements sent in one
 * round trip, its arguments inlined as literals escaped by the server's
 * rules (not prepared), its results read in order. */
#include "db.h"
#include "db_conn.h"

#include "err.h"
#include "faults.h"
#include "log.h"
#include "util.h"

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

/* How a batch's rows are read: each(ctx, at, row) for every row of every
 * statement (at counts statements from 0). */
struct batch_reader {
    db_batch_row_fn each;
    void *ctx;
};

/* Reads the results of a batch in order. *at is the statement being read;
 * last is the index of the final statement, the COMMIT unless
 * DB_BATCH_OPEN; with DB_BATCH_REST statement 0 is inside the
 * transaction too (an earlier batch began it). */
static int batch_results(struct db_conn *c, int last, unsigned how, const struct batch_reader *rd,
                         int *at)
{
    int more;
    int rc = TD_OK;
    bool lost = false;
    *at = 0;
    do {
        MYSQL_RES *res = db_store_result(c);
        if (res != NULL) {
            struct db_batch_row br = {.nfields = (int)mysql_num_fields(res)};
            MYSQL_ROW row;
            while (rc == TD_OK && (row = mysql_fetch_row(res)) != NULL) {
                br.vals = (const char *const *)row;
                br.lens = mysql_fetch_lengths(res);
                rc = rd->each(rd->ctx, *at, &br);
            }
            mysql_free_result(res);
        } else if (mysql_field_count(c->m) != 0) {
            return db_fail(c, mysql_errno(c->m), mysql_error(c->m), "batch result");
        }
        /* Every statement between START TRANSACTION and COMMIT must end
         * inside the transaction (see lost_by_server). */
        bool open = (how & DB_BATCH_OPEN) != 0;
        if ((*at > 0 || (how & DB_BATCH_REST)) && (*at < last || open) && !db_server_in_tx(c))
            lost = true;
        DB_CALL(c, more, mysql_next_result, c->m);
        if (more > 0) {
            ++*at;
            /* 1213 at the COMMIT is a Galera certification conflict. */
            int frc = db_fail(c, mysql_errno(c->m), mysql_error(c->m),
                              *at == last && !(how & DB_BATCH_OPEN) ? "COMMIT" : "batch");
            if (lost) {
                /* Statements ran outside the transaction before this one
                 * failed: some of them may be kept. Running the batch
                 * again would meet its own rows (a new order answered as
                 * a replay); what holds is for the database to say. */
                log_error("mysql: a batch's transaction was rolled back by the server and "
                          "its statements ran on alone until one failed; answering unavailable");
                return TD_EUNAVAIL;
            }
            return frc;
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

/* What failed, for db_fail, of a DB_BATCH_CALL text whose procedure
 * passed on an error: its COMMIT (1213 there is a Galera certification
 * conflict), or a statement before it. */
static const char *call_failed_at(const char *msg)
{
    static const char at_commit[] = "at COMMIT: ";
    return strncmp(msg, at_commit, sizeof at_commit - 1) == 0 ? "COMMIT" : "batch";
}

/* A DB_BATCH_CALL text: sent, then its answer awaited. A link that fails
 * sending may just be stale (nothing reached the server); from the send
 * on, the procedure may be running its transaction, and a link lost is the
 * server's trouble. */
static int call_once(struct db_conn *c, const char *text, size_t len, int last, unsigned how,
                     const struct batch_reader *rd, int *at)
{
    int sent;
    my_bool failed;
    c->in_tx = false;
    DB_CALL(c, sent, mysql_send_query, c->m, text, len);
    if (sent != 0)
        return db_fail(c, mysql_errno(c->m), mysql_error(c->m), "batch");
    c->in_tx = true;
    DB_CALL(c, failed, mysql_read_query_result, c->m);
    if (failed) {
        const char *msg = mysql_error(c->m);
        return db_fail(c, mysql_errno(c->m), msg, call_failed_at(msg));
    }
    return batch_results(c, last, how, rd, at);
}

static int batch_once(struct db_conn *c, const char *text, size_t len, int last, unsigned how,
                      const struct batch_reader *rd, int *at)
{
    *at = 0;
    if (c->m == NULL)
        return TD_EUNAVAIL;
    if (how & DB_BATCH_CALL)
        return call_once(c, text, len, last, how, rd, at);
    if (how & DB_BATCH_REST) {
        /* The transaction is under way: a link lost now lost it. */
        if (db_query(c, text, len) != 0)
            return db_fail(c, mysql_errno(c->m), mysql_error(c->m), "batch");
        return batch_results(c, last, how, rd, at);
    }
    /* Until its first statement (START TRANSACTION) answers, a failing
     * link may just be stale, as for db_begin; from then on the batch is
     * inside a transaction, a link lost is the server's trouble, and an
     * error leaves the transaction to be rolled back. */
    c->in_tx = false;
    if (db_query(c, text, len) != 0)
        return db_fail(c, mysql_errno(c->m), mysql_error(c->m), "batch");
    c->in_tx = true;
    return batch_results(c, last, how, rd, at);
}

/* A reader that drops every row (mysql.batch_answer_lost). */
static int skip_rows(void *ctx, int at, const struct db_batch_row *row)
{
    (void)ctx;
    (void)at;
    (void)row;
    return TD_OK;
}

/* The batch itself, its text already built: run, redialled once when the
 * link was stale, rolled back on error. */
static int batch_execute(struct db_conn *c, const char *sql, const char *text, size_t len,
                         unsigned how, const struct batch_reader *rd)
{
    int at;
    int last = 0; /* the index of the final statement: statements are split by ';' */
    for (const char *p = sql; *p != '\0'; p++)
        last += *p == ';';
    bool was_fresh = c->fresh;
    /* The test build can lose a whole transaction's answer after the
     * server ran it to its COMMIT (fail), as when the link dies before the
     * first result is read: its rows are not handed to the reader, the
     * link is dropped, and the stale-link path below sends the text again,
     * to meet the rows it just committed. */
    bool lose = (how == 0 || how == DB_BATCH_CALL) && FAULT_POINT("mysql.batch_answer_lost");
    const struct batch_reader deaf = {skip_rows, NULL};
    int rc = batch_once(c, text, len, last, how, lose ? &deaf : rd, &at);
    if (lose && rc == TD_OK) {
        db_lose_link(c);
        /* A CALL's answer comes only after its COMMIT: lost, it was lost
         * after the send, and the outcome is unknown (nothing is sent
         * again). Another text's was lost before its first result, where
         * batch_once had not yet seen the transaction begin. */
        c->in_tx = (how & DB_BATCH_CALL) != 0;
        rc = TD_EUNAVAIL;
        at = 0;
    }
    /* A stale link fails at the first statement, before anything ran. If
     * the batch did commit and only its answer was lost, running it again
     * meets the unique index, and the caller finds the order its key has:
     * its own, answered as created, when it carries a number this request
     * drew (unique_index.c). (Not the rest of a transaction: that went
     * with the link.) */
    if (at == 0 && !(how & DB_BATCH_REST) && db_redial_stale(c, rc, was_fresh))
        rc = batch_once(c, text, len, last, how, rd, &at);
    c->fresh = false;
    if (rc != TD_OK) {
        db_rollback(c); /* the statement that failed left the transaction open */
        return rc;
    }
    c->in_tx = (how & DB_BATCH_OPEN) != 0; /* the batch ended with its COMMIT, unless left open */
    return TD_OK;
}

/* db_batch's reader: the first row of statement row_at into cols. */
struct first_row {
    int row_at;
    const struct db_col *cols;
    int ncols;
    bool got;
};

static int first_row_each(void *ctx, int at, const struct db_batch_row *row)
{
    struct first_row *f = ctx;
    if (at != f->row_at || f->got)
        return TD_OK;
    /* By db_rows' rules: the column count must match and every value
     * must fit its buffer (else TD_EINTERNAL, logged). */
    if (row->nfields != f->ncols) {
        log_error("mysql: a batch's row has %d columns, expected %d", row->nfields, f->ncols);
        return TD_EINTERNAL;
    }
    for (int i = 0; i < f->ncols && i < row->nfields; i++) {
        if (f->cols[i].type == DB_INT) {
            *(int64_t *)f->cols[i].dst = row->vals[i] != NULL ? strtoll(row->vals[i], NULL, 10) : 0;
            continue;
        }
        size_t n = row->vals[i] != NULL ? row->lens[i] : 0;
        if (n >= f->cols[i].cap) {
            log_error("mysql: a value of a batch's row does not fit its buffer");
            return TD_EINTERNAL;
        }
        memcpy(f->cols[i].dst, row->vals[i] != NULL ? row->vals[i] : "", n);
        ((char *)f->cols[i].dst)[n] = '\0';
    }
    f->got = true;
    return TD_OK;
}

int db_batch(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs, int row_at,
             const struct db_col *cols, int ncols)
{
    char text[DB_BATCH_MAX];
    if (c->m == NULL)
        return TD_EUNAVAIL;
    size_t len = inline_args(c, sql, args, nargs, text, sizeof text);
    if (len == 0) {
        log_error("mysql: a batch does not fit %d bytes or its arguments", DB_BATCH_MAX);
        return TD_EINTERNAL;
    }
    struct first_row f = {row_at, cols, ncols, false};
    struct batch_reader rd = {first_row_each, &f};
    int rc = batch_execute(c, sql, text, len, 0, &rd);
    if (rc != TD_OK)
        return rc;
    return f.got ? TD_OK : TD_ENOTFOUND;
}

int db_batch_each(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs,
                  unsigned how, db_batch_row_fn each, void *ctx)
{
    if (c->m == NULL)
        return TD_EUNAVAIL;
    /* Every argument at its escaped worst case, and the text around them. */
    size_t cap = strlen(sql) + 1;
    for (int i = 0; i < nargs; i++)
        cap += args[i].type == DB_STR ? 2 * args[i].len + 3 : 24;
    char *text = xmalloc(cap);
    size_t len = inline_args(c, sql, args, nargs, text, cap);
    int rc = TD_EINTERNAL;
    if (len == 0) {
        log_error("mysql: a batch's arguments do not match its placeholders");
    } else {
        struct batch_reader rd = {each, ctx};
        rc = batch_execute(c, sql, text, len, how, &rd);
    }
    free(text);
    return rc;
}
