/* db_stmt.c - prepared statements on a connection (db.h): prepared once
 * per connection, keyed by the SQL text's address; arguments bound from
 * struct db_arg, rows copied out into struct db_col buffers. */
#include "db.h"
#include "db_conn.h"

#include "err.h"
#include "log.h"

#include <mysql.h>
#include <stdio.h>
#include <string.h>

static int prepare(struct db_conn *c, const char *sql, MYSQL_STMT **out)
{
    *out = NULL;
    if (c->m == NULL)
        return TD_EUNAVAIL;
    for (int i = 0; i < c->nstmts; i++) {
        if (c->stmts[i].sql == sql) {
            *out = c->stmts[i].stmt;
            return TD_OK;
        }
    }
    if (c->nstmts == DB_MAX_STMTS) {
        log_error("mysql: more than %d distinct statements; raise DB_MAX_STMTS", DB_MAX_STMTS);
        return TD_EINTERNAL;
    }
    MYSQL_STMT *s = mysql_stmt_init(c->m);
    if (s == NULL)
        return TD_EINTERNAL;
    int err;
    DB_CALL(c, err, mysql_stmt_prepare, s, sql, (unsigned long)strlen(sql));
    if (err != 0) {
        int rc = db_fail(c, mysql_stmt_errno(s), mysql_stmt_error(s), sql);
        mysql_stmt_close(s);
        return rc;
    }
    c->stmts[c->nstmts].sql = sql;
    c->stmts[c->nstmts].stmt = s;
    c->nstmts++;
    *out = s;
    return TD_OK;
}

static void bind_args(MYSQL_BIND *b, const struct db_arg *args, int nargs)
{
    memset(b, 0, sizeof(MYSQL_BIND) * (size_t)nargs);
    for (int i = 0; i < nargs; i++) {
        switch (args[i].type) {
        case DB_INT:
            b[i].buffer_type = MYSQL_TYPE_LONGLONG;
            b[i].buffer = (void *)&args[i].i;
            break;
        case DB_STR:
            b[i].buffer_type = MYSQL_TYPE_STRING;
            b[i].buffer = (void *)args[i].s;
            b[i].buffer_length = args[i].len;
            b[i].length = (unsigned long *)&args[i].len;
            break;
        case DB_NULL:
            b[i].buffer_type = MYSQL_TYPE_NULL;
            break;
        }
    }
}

/* Prepares (once), binds and executes. */
static int run(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs,
               MYSQL_STMT **out)
{
    MYSQL_STMT *s;
    MYSQL_BIND b[DB_MAX_ARGS];
    *out = NULL;
    int rc = prepare(c, sql, &s);
    if (rc != TD_OK)
        return rc;
    if (nargs > DB_MAX_ARGS || mysql_stmt_param_count(s) != (unsigned long)nargs) {
        log_error("mysql: '%s' takes %lu arguments, given %d", sql, mysql_stmt_param_count(s),
                  nargs);
        return TD_EINTERNAL;
    }
    bind_args(b, args, nargs);
    if (nargs > 0 && mysql_stmt_bind_param(s, b) != 0)
        return db_fail(c, mysql_stmt_errno(s), mysql_stmt_error(s), sql);
    int err;
    DB_CALL(c, err, mysql_stmt_execute, s);
    if (err != 0)
        return db_fail(c, mysql_stmt_errno(s), mysql_stmt_error(s), sql);
    *out = s;
    return TD_OK;
}

int db_exec(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs,
            uint64_t *affected, uint64_t *insert_id)
{
    MYSQL_STMT *s;
    int rc = run(c, sql, args, nargs, &s);
    c->fresh = false;
    if (rc != TD_OK)
        return rc;
    if (affected != NULL)
        *affected = (uint64_t)mysql_stmt_affected_rows(s);
    if (insert_id != NULL)
        *insert_id = (uint64_t)mysql_stmt_insert_id(s);
    return TD_OK;
}

struct col_state {
    MYSQL_BIND b[DB_MAX_COLS];
    unsigned long len[DB_MAX_COLS];
    my_bool is_null[DB_MAX_COLS];
    my_bool error[DB_MAX_COLS];
    long long ints[DB_MAX_COLS];
};

static void bind_cols(struct col_state *st, const struct db_col *cols, int ncols)
{
    memset(st, 0, sizeof *st);
    for (int i = 0; i < ncols; i++) {
        MYSQL_BIND *b = &st->b[i];
        b->length = &st->len[i];
        b->is_null = &st->is_null[i];
        b->error = &st->error[i];
        if (cols[i].type == DB_INT) {
            b->buffer_type = MYSQL_TYPE_LONGLONG;
            b->buffer = &st->ints[i];
        } else {
            b->buffer_type = MYSQL_TYPE_STRING;
            b->buffer = cols[i].dst;
            b->buffer_length = cols[i].cap - 1; /* room for the NUL */
        }
    }
}

/* Copies a fetched row out of st into the callers' buffers. */
static void store_cols(struct col_state *st, const struct db_col *cols, int ncols)
{
    for (int i = 0; i < ncols; i++) {
        if (cols[i].type == DB_INT) {
            *(int64_t *)cols[i].dst = st->is_null[i] ? 0 : (int64_t)st->ints[i];
        } else {
            char *p = cols[i].dst;
            p[st->is_null[i] ? 0 : st->len[i]] = '\0';
        }
    }
}

int db_rows(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs,
            const struct db_col *cols, int ncols, int (*each)(void *ctx), void *ctx)
{
    MYSQL_STMT *s;
    struct col_state st;
    bool was_fresh = c->fresh;
    int rc = run(c, sql, args, nargs, &s);
    if (db_redial_stale(c, rc, was_fresh))
        rc = run(c, sql, args, nargs, &s);
    c->fresh = false;
    if (rc != TD_OK)
        return rc;
    /* Buffer the (small, LIMITed) result so that freeing it mid-way never
     * leaves unread rows on the wire. */
    int err;
    DB_CALL(c, err, mysql_stmt_store_result, s);
    if (err != 0)
        return db_fail(c, mysql_stmt_errno(s), mysql_stmt_error(s), sql);
    if (ncols > DB_MAX_COLS || mysql_stmt_field_count(s) != (unsigned int)ncols) {
        log_error("mysql: '%s' returns %u columns, expected %d", sql, mysql_stmt_field_count(s),
                  ncols);
        mysql_stmt_free_result(s);
        db_conn_close(c);
        return TD_EINTERNAL;
    }
    bind_cols(&st, cols, ncols);
    if (mysql_stmt_bind_result(s, st.b) != 0) {
        rc = db_fail(c, mysql_stmt_errno(s), mysql_stmt_error(s), sql);
        goto out;
    }
    rc = TD_ENOTFOUND;
    for (;;) {
        int f = mysql_stmt_fetch(s);
        if (f == MYSQL_NO_DATA)
            break;
        if (f == MYSQL_DATA_TRUNCATED) {
            log_error("mysql: a value of '%s' does not fit its buffer", sql);
            rc = TD_EINTERNAL;
            break;
        }
        if (f != 0) {
            rc = db_fail(c, mysql_stmt_errno(s), mysql_stmt_error(s), sql);
            goto out;
        }
        store_cols(&st, cols, ncols);
        rc = TD_OK;
        if (each == NULL)
            break;
        int stop = each(ctx);
        if (stop != 0) {
            rc = stop;
            break;
        }
    }
out:
    /* Discard what was not read, so the connection stays in sync. */
    if (c->m != NULL)
        mysql_stmt_free_result(s);
    return rc;
}

int db_row(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs,
           const struct db_col *cols, int ncols)
{
    return db_rows(c, sql, args, nargs, cols, ncols, NULL, NULL);
}

int db_read(const char *sql, const struct db_arg *args, int nargs, const struct db_col *cols,
            int ncols, int (*each)(void *ctx), void *ctx)
{
    struct db_conn *c;
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    return db_rows(c, sql, args, nargs, cols, ncols, each, ctx);
}

int db_read_row(const char *sql, const struct db_arg *args, int nargs, const struct db_col *cols,
                int ncols)
{
    return db_read(sql, args, nargs, cols, ncols, NULL, NULL);
}
