/* model.h - ticketd's domain records as plain C structs: what the store
 * reads and writes and the API turns into JSON. No library headers. */
#ifndef TICKETD_MODEL_H
#define TICKETD_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#define TITLE_MAX      200 /* characters */
#define ORDER_NO_LEN   20
#define REQUEST_ID_MAX 64
#define TXN_ID_MAX     64
#define TIME_LEN       24 /* "2026-12-01T08:00:00Z" */

struct session {
    int64_t id;
    char title[TITLE_MAX * 4 + 1]; /* UTF-8 */
    int64_t price_cents;
    int64_t capacity;
    int64_t stock;
    int64_t version;
};

enum order_status {
    ORDER_PENDING_PAYMENT,
    ORDER_PAID,
    ORDER_TICKETED,
    ORDER_COMPLETED,
    ORDER_CANCELLED,
    ORDER_STATUS_COUNT
};

struct order {
    int64_t id;
    char order_no[ORDER_NO_LEN + 1];
    int64_t user_id;
    int64_t session_id;
    char request_id[REQUEST_ID_MAX + 1];
    int64_t quantity;
    int64_t amount_cents;
    enum order_status status;
    int64_t version;
    char created_at[TIME_LEN + 1];
    char updated_at[TIME_LEN + 1];
};

/* "PENDING_PAYMENT" and so on; static strings. */
const char *order_status_name(enum order_status s);
/* Returns true and sets *out when name is a status name. */
bool order_status_parse(const char *name, enum order_status *out);

/* True when s is an order number: exactly ORDER_NO_LEN ASCII digits. The
 * database compares strings with PAD SPACE (utf8mb4_bin ignores trailing
 * spaces), so "<order_no> " would find the order: anything else must be
 * refused before a query sees it. s may be NULL. */
bool order_no_valid(const char *s);

/* The points rule (consume.c credits them): one point per whole CENTS_PER_POINT cents an order
 * cost (the audit's points check counts by the same constant). */
#define CENTS_PER_POINT 100
int64_t consume_points_for(int64_t amount_cents);

#endif
