/* audit_mysql.c - the audit's checks as SQL. Each counts the rows that
 * break one invariant and names the first of them, so that a failed
 * check says where to look. */
#include "store_audit.h"

#include "db.h"
#include "err.h"
#include "event_payload.h"
#include "model.h"
#include "payment.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define PAID_STATES "('PAID', 'TICKETED', 'COMPLETED')"

#define STRINGIFY_(x)       #x
#define STRINGIFY(x)        STRINGIFY_(x)
#define CENTS_PER_POINT_SQL STRINGIFY(CENTS_PER_POINT)

enum stmt {
    A_STOCK,
    A_STOCK_FIRST,
    A_REQUEST,
    A_APPLIED,
    A_PAID_ORDERS,
    A_POINTS,
    A_NEGATIVE,
    A_HISTORY,
    A_REFUNDS,
    A_COUNT
};

/* The scope: every '?' of these statements is bound to the same text,
 * "" for the whole database or a list of session ids ("12,13"). A load
 * run judges its own sessions, their orders, their payments and the users
 * who ordered there, whatever earlier runs left in the database. */
#define IN_SCOPE_OF(session_col) "(? = '' OR FIND_IN_SET(" session_col ", ?) > 0)"
#define SCOPE_ORDERS             "(SELECT id FROM orders WHERE FIND_IN_SET(session_id, ?) > 0)"
#define SCOPE_SESSION            IN_SCOPE_OF("session_id")
#define SCOPE_ORDER_SESSION      IN_SCOPE_OF("o.session_id")
#define SCOPE_ID                 IN_SCOPE_OF("id")
#define SCOPE_PAYMENT            "(? = '' OR order_id IN " SCOPE_ORDERS ")"
#define SCOPE_P_PAYMENT          "(? = '' OR p.order_id IN " SCOPE_ORDERS ")"

/* Seats held per session: every order that is not cancelled holds its
 * quantity (a cancel or an expiry gives them back). */
#define HELD                                                                                       \
    "FROM sessions s LEFT JOIN (SELECT session_id, SUM(quantity) AS held FROM orders "             \
    "WHERE status <> 'CANCELLED' GROUP BY session_id) h ON h.session_id = s.id "                   \
    "WHERE " IN_SCOPE_OF("s.id") " "

/* What each user's points must be: consume_points_for (model.h), one
 * per whole CENTS_PER_POINT cents, of each paid order. Scoped, the users
 * are those who ordered on the sessions; their points count all their
 * orders, as points belong to the user. */
#define EXPECTED_POINTS                                                                            \
    "SELECT u.user_id, COALESCE(e.points, 0) AS want, COALESCE(p.points, 0) AS have "              \
    "FROM (SELECT user_id FROM orders WHERE status IN " PAID_STATES                                \
    " UNION SELECT user_id FROM user_points) u "                                                   \
    "LEFT JOIN (SELECT user_id, SUM(amount_cents DIV " CENTS_PER_POINT_SQL                         \
    ") AS points FROM orders "                                                                     \
    "WHERE status IN " PAID_STATES " GROUP BY user_id) e ON e.user_id = u.user_id "                \
    "LEFT JOIN user_points p ON p.user_id = u.user_id "                                            \
    "WHERE (? = '' OR u.user_id IN (SELECT user_id FROM orders "                                   \
    "WHERE FIND_IN_SET(session_id, ?) > 0))"

static const char *const sql[A_COUNT] = {
    [A_STOCK] =
        "SELECT COUNT(*), COALESCE(SUM(s.capacity <> s.stock + COALESCE(h.held, 0)), 0) " HELD,
    [A_STOCK_FIRST] = "SELECT s.id, s.capacity, s.stock, COALESCE(h.held, 0) " HELD
                      "AND s.capacity <> s.stock + COALESCE(h.held, 0) ORDER BY s.id LIMIT 1",
    [A_REQUEST] = "SELECT (SELECT COUNT(*) FROM orders WHERE " SCOPE_SESSION "), "
                  "(SELECT COUNT(*) FROM (SELECT 1 FROM orders WHERE " SCOPE_SESSION
                  " GROUP BY user_id, session_id, request_id HAVING COUNT(*) > 1) d)",
    /* At most one APPLIED payment per order, and applied_order_id set on
     * exactly the APPLIED ones (the unique key counts on that). */
    [A_APPLIED] =
        "SELECT (SELECT COUNT(*) FROM payments WHERE outcome = 'APPLIED' AND " SCOPE_PAYMENT
        "), (SELECT COUNT(*) FROM (SELECT order_id FROM payments "
        "WHERE outcome = 'APPLIED' AND " SCOPE_PAYMENT
        " GROUP BY order_id HAVING COUNT(*) > 1) d), "
        "(SELECT COUNT(*) FROM payments "
        "WHERE (outcome = 'APPLIED') <> (applied_order_id <=> order_id) AND " SCOPE_PAYMENT ")",
    /* An order is paid (or beyond) exactly when a payment was applied to it. */
    [A_PAID_ORDERS] =
        "SELECT COUNT(*), COALESCE(MIN(o.order_no), '') FROM orders o "
        "LEFT JOIN (SELECT DISTINCT order_id FROM payments WHERE outcome = 'APPLIED') p "
        "ON p.order_id = o.id "
        "WHERE (o.status IN " PAID_STATES ") <> (p.order_id IS NOT NULL) AND " SCOPE_ORDER_SESSION,
    [A_POINTS] = "SELECT COUNT(*), COALESCE(SUM(want <> have), 0), "
                 "COALESCE(MIN(CASE WHEN want <> have THEN user_id END), 0), "
                 "(SELECT COUNT(*) FROM outbox WHERE event_type = '" EVENT_ORDER_PAID "' "
                 "AND published_at IS NULL), "
                 "(SELECT COUNT(*) FROM dead_letters WHERE consumer = '" EVENTS_GROUP_POINTS "' "
                 "AND replayed_at IS NULL) FROM (" EXPECTED_POINTS ") x",
    [A_NEGATIVE] =
        "SELECT COUNT(*), COALESCE(MIN(id), 0) FROM sessions WHERE stock < 0 AND " SCOPE_ID,
    /* Every transition adds one to version and writes one history row. */
    [A_HISTORY] = "SELECT (SELECT COUNT(*) FROM orders WHERE " SCOPE_SESSION
                  "), COUNT(*), COALESCE(MIN(o.order_no), '') "
                  "FROM orders o LEFT JOIN (SELECT order_id, COUNT(*) AS n FROM order_history "
                  "GROUP BY order_id) h ON h.order_id = o.id "
                  "WHERE COALESCE(h.n, 0) <> o.version AND " SCOPE_ORDER_SESSION,
    /* A refund is owed only for money that paid nothing: a payment whose
     * own txn_id is the applied one must never be refunded. */
    [A_REFUNDS] = "SELECT COUNT(*), COALESCE(MIN(e.biz_key), '') FROM outbox e "
                  "JOIN payments p ON p.txn_id = e.biz_key "
                  "WHERE e.event_type = '" EVENT_REFUND_REQUIRED "' AND p.outcome = 'APPLIED' "
                  "AND " SCOPE_P_PAYMENT,
};

/* The arguments of one statement: the scope, once per '?' (none of these
 * statements has a '?' in a literal). */
#define SCOPE_ARGS_MAX 8

struct scoped {
    struct db_arg args[SCOPE_ARGS_MAX];
    int n;
};

static struct scoped scope_args(const char *stmt, const char *scope)
{
    struct scoped a = {.n = 0};
    for (const char *p = strchr(stmt, '?'); p != NULL && a.n < SCOPE_ARGS_MAX;
         p = strchr(p + 1, '?'))
        a.args[a.n++] = DB_S(scope);
    return a;
}

/* db_row on statement i of the table, within the scope. */
static int audit_row(struct db_conn *c, enum stmt i, const char *scope, const struct db_col *cols,
                     int ncols)
{
    struct scoped a = scope_args(sql[i], scope);
    return db_row(c, sql[i], a.args, a.n, cols, ncols);
}

static void set(struct audit_check *a, const char *name, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void set(struct audit_check *a, const char *name, bool ok, const char *fmt, ...)
{
    va_list ap;
    a->name = name;
    a->ok = ok;
    va_start(ap, fmt);
    vsnprintf(a->detail, sizeof a->detail, fmt, ap);
    va_end(ap);
}

static int check_stock(struct db_conn *c, const char *scope, struct audit_check *a)
{
    int64_t sessions = 0, bad = 0, id = 0, cap = 0, stock = 0, held = 0;
    struct db_col cols[] = {DB_COL_I(&sessions), DB_COL_I(&bad)};
    int rc = audit_row(c, A_STOCK, scope, cols, 2);
    if (rc != TD_OK)
        return rc;
    if (bad == 0) {
        set(a, "stock_conservation", true,
            "%lld sessions: capacity = stock + seats held by orders not cancelled, in each",
            (long long)sessions);
        return TD_OK;
    }
    struct db_col first[] = {DB_COL_I(&id), DB_COL_I(&cap), DB_COL_I(&stock), DB_COL_I(&held)};
    rc = audit_row(c, A_STOCK_FIRST, scope, first, 4);
    if (rc != TD_OK && rc != TD_ENOTFOUND)
        return rc;
    set(a, "stock_conservation", false,
        "%lld of %lld sessions do not balance; first: session %lld has capacity %lld, "
        "stock %lld, %lld seats held",
        (long long)bad, (long long)sessions, (long long)id, (long long)cap, (long long)stock,
        (long long)held);
    return TD_OK;
}

static int check_requests(struct db_conn *c, const char *scope, struct audit_check *a)
{
    int64_t orders = 0, bad = 0;
    struct db_col cols[] = {DB_COL_I(&orders), DB_COL_I(&bad)};
    int rc = audit_row(c, A_REQUEST, scope, cols, 2);
    if (rc != TD_OK)
        return rc;
    if (bad == 0)
        set(a, "one_order_per_request", true, "%lld orders, no two for one user and request id",
            (long long)orders);
    else
        set(a, "one_order_per_request", false,
            "%lld user and request id pairs have more than one order", (long long)bad);
    return TD_OK;
}

static int check_applied(struct db_conn *c, const char *scope, struct audit_check *a)
{
    int64_t applied = 0, doubled = 0, marks = 0;
    struct db_col cols[] = {DB_COL_I(&applied), DB_COL_I(&doubled), DB_COL_I(&marks)};
    int rc = audit_row(c, A_APPLIED, scope, cols, 3);
    if (rc != TD_OK)
        return rc;
    if (doubled == 0 && marks == 0)
        set(a, "one_applied_payment_per_order", true,
            "%lld applied payments, at most one per order", (long long)applied);
    else
        set(a, "one_applied_payment_per_order", false,
            "%lld orders have more than one applied payment; %lld payments have "
            "applied_order_id wrong for their outcome",
            (long long)doubled, (long long)marks);
    return TD_OK;
}

static int check_paid_orders(struct db_conn *c, const char *scope, struct audit_check *a)
{
    int64_t bad = 0;
    char first[32];
    struct db_col cols[] = {DB_COL_I(&bad), DB_COL_S(first)};
    int rc = audit_row(c, A_PAID_ORDERS, scope, cols, 2);
    if (rc != TD_OK)
        return rc;
    if (bad == 0)
        set(a, "paid_orders_match_payments", true,
            "every paid, ticketed or completed order has its applied payment, and no other does");
    else
        set(a, "paid_orders_match_payments", false,
            "%lld orders are paid without an applied payment or the reverse; first: %s",
            (long long)bad, first);
    return TD_OK;
}

static int check_points(struct db_conn *c, const char *scope, struct audit_check *a)
{
    int64_t users = 0, bad = 0, first = 0, unrelayed = 0, dead = 0;
    struct db_col cols[] = {DB_COL_I(&users), DB_COL_I(&bad), DB_COL_I(&first),
                            DB_COL_I(&unrelayed), DB_COL_I(&dead)};
    int rc = audit_row(c, A_POINTS, scope, cols, 5);
    if (rc != TD_OK)
        return rc;
    if (bad == 0)
        set(a, "points_match_paid_orders", true,
            "%lld users: points = 1 per 100 cents of their paid orders", (long long)users);
    else
        set(a, "points_match_paid_orders", false,
            "%lld of %lld users differ; first: user %lld; %lld order.paid events not yet "
            "relayed (the consumers may still be catching up); %lld open points dead "
            "letters (ticketd dead-letters list)",
            (long long)bad, (long long)users, (long long)first, (long long)unrelayed,
            (long long)dead);
    return TD_OK;
}

static int check_negative(struct db_conn *c, const char *scope, struct audit_check *a)
{
    int64_t bad = 0, first = 0;
    struct db_col cols[] = {DB_COL_I(&bad), DB_COL_I(&first)};
    int rc = audit_row(c, A_NEGATIVE, scope, cols, 2);
    if (rc != TD_OK)
        return rc;
    if (bad == 0)
        set(a, "no_negative_stock", true, "no session has negative stock");
    else
        set(a, "no_negative_stock", false, "%lld sessions have negative stock; first: %lld",
            (long long)bad, (long long)first);
    return TD_OK;
}

static int check_history(struct db_conn *c, const char *scope, struct audit_check *a)
{
    int64_t orders = 0, bad = 0;
    char first[32];
    struct db_col cols[] = {DB_COL_I(&orders), DB_COL_I(&bad), DB_COL_S(first)};
    int rc = audit_row(c, A_HISTORY, scope, cols, 3);
    if (rc != TD_OK)
        return rc;
    if (bad == 0)
        set(a, "history_matches_version", true,
            "%lld orders: each has exactly `version` history rows", (long long)orders);
    else
        set(a, "history_matches_version", false,
            "%lld of %lld orders have a history that does not match their version; first: %s",
            (long long)bad, (long long)orders, first);
    return TD_OK;
}

static int check_refunds(struct db_conn *c, const char *scope, struct audit_check *a)
{
    int64_t bad = 0;
    char first[TXN_ID_BYTES + 1];
    struct db_col cols[] = {DB_COL_I(&bad), DB_COL_S(first)};
    int rc = audit_row(c, A_REFUNDS, scope, cols, 2);
    if (rc != TD_OK)
        return rc;
    if (bad == 0)
        set(a, "no_refund_of_applied_payment", true,
            "no refund was requested for a payment that paid its order");
    else
        set(a, "no_refund_of_applied_payment", false,
            "%lld payments that paid their order were also sent for refund; first: txn %s",
            (long long)bad, first);
    return TD_OK;
}

int store_audit(const char *scope, struct audit_check *out, int *n)
{
    static int (*const checks[])(struct db_conn *, const char *, struct audit_check *) = {
        check_stock,  check_requests, check_applied, check_paid_orders,
        check_points, check_negative, check_history, check_refunds,
    };
    struct db_conn *c;
    *n = 0;
    memset(out, 0, sizeof *out * AUDIT_MAX_CHECKS);
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    for (size_t i = 0; i < sizeof checks / sizeof checks[0] && i < AUDIT_MAX_CHECKS; i++) {
        rc = checks[i](c, scope, &out[i]);
        if (rc != TD_OK)
            return rc;
        (*n)++;
    }
    return TD_OK;
}
