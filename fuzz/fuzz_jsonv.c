/* fuzz_jsonv.c - request bodies through the strict JSON reader (jsonv.c),
 * with each field read the way the handlers read it:
 *
 *   POST /api/v1/orders            session_id 1..2^53-1, quantity 1..6
 *   POST /api/v1/sessions          title 1..200 characters, price_cents
 *                                  0..100000000, stock 0..10000000
 *   POST /api/v1/payments/callback txn_id 1..64 characters (no space or
 *                                  control), order_no 1..64 bytes,
 *                                  amount_cents 0..2^53-1, status
 *                                  SUCCESS or FAILED
 *
 * Input: one body, read under all three sets of rules. Invariants: a
 * parsed body is an object, equal to what a lenient parse gives (strict
 * parsing only refuses, never changes a value); each field reader agrees
 * with a reference reading of the same value (accepts exactly the
 * integers in range and the strings of the right length, and returns that
 * value); a refusal always says why. The bounds are the handlers'
 * (api_orders.c, api_sessions.c, api_payments.c); the harness links only
 * jsonv.c, so they are restated here. */
#include "fuzz.h"

#include "err.h"
#include "jsonv.h"

#include <stdbool.h>

/* The largest input worth trying, a little past the limits the parser
 * enforces (fuzz.mk reads it for -max_len). */
#define FUZZ_MAX_LEN 4096

#define MAX_USER_ID   9007199254740991LL /* AUTH_MAX_USER_ID */
#define MAX_PER_ORDER 6                  /* TICKETD_MAX_PER_ORDER's default */
#define TITLE_MAX     200
#define PRICE_MAX     100000000
#define STOCK_MAX     10000000
#define TXN_ID_MAX    64
#define ORDER_NO_MAX  64
#define CENTS_MAX     9007199254740991LL

static bool read_int(const json_t *o, const char *field, int64_t min, int64_t max, int64_t *out)
{
    char why[160];
    why[0] = '\0';
    int64_t v = INT64_MIN;
    int rc = jsonv_int(o, field, min, max, &v, why, sizeof why);
    const json_t *j = json_object_get(o, field);
    bool want = j != NULL && json_is_integer(j) && json_integer_value(j) >= min &&
                json_integer_value(j) <= max;
    CHECK((rc == TD_OK) == want);
    if (rc == TD_OK) {
        CHECK(v >= min && v <= max && v == json_integer_value(j));
        *out = v;
    } else {
        CHECK(rc == TD_EINVAL && v == INT64_MIN && why[0] != '\0');
        CHECK(strlen(why) < sizeof why);
    }
    return rc == TD_OK;
}

static bool read_string(const json_t *o, const char *field, size_t max_len, const char **out)
{
    char why[160];
    why[0] = '\0';
    const char *s = NULL;
    int rc = jsonv_string(o, field, max_len, &s, why, sizeof why);
    const json_t *j = json_object_get(o, field);
    /* A string with a NUL inside ("\u0000") would be cut short by every
     * C string function after this point: it must be refused. */
    bool want = j != NULL && json_is_string(j) && json_string_length(j) >= 1 &&
                json_string_length(j) <= max_len &&
                memchr(json_string_value(j), '\0', json_string_length(j)) == NULL;
    CHECK((rc == TD_OK) == want);
    if (rc == TD_OK) {
        size_t n = strlen(s);
        CHECK(n >= 1 && n <= max_len && s == json_string_value(j));
        *out = s;
    } else {
        CHECK(rc == TD_EINVAL && s == NULL && why[0] != '\0');
    }
    return rc == TD_OK;
}

/* UTF-8 code points, as api_sessions.c counts them. */
static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s != '\0'; s++) {
        if (((unsigned char)*s & 0xC0) != 0x80)
            n++;
    }
    return n;
}

/* payments_txn_id_valid (payments.c, which needs the store to link). */
static bool txn_id_valid(const char *s)
{
    size_t chars = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p <= 0x20 || *p == 0x7f)
            return false;
        if ((*p & 0xC0) != 0x80)
            chars++;
    }
    return chars >= 1 && chars <= TXN_ID_MAX;
}

static void order_create(const json_t *b)
{
    int64_t session_id, quantity;
    if (!read_int(b, "session_id", 1, MAX_USER_ID, &session_id))
        return;
    if (!read_int(b, "quantity", 1, MAX_PER_ORDER, &quantity))
        return;
    CHECK(session_id >= 1 && quantity >= 1 && quantity <= MAX_PER_ORDER);
}

static void session_create(const json_t *b)
{
    const char *title;
    int64_t price, stock;
    if (!read_string(b, "title", TITLE_MAX * 4, &title) || utf8_chars(title) > TITLE_MAX)
        return;
    if (!read_int(b, "price_cents", 0, PRICE_MAX, &price))
        return;
    if (!read_int(b, "stock", 0, STOCK_MAX, &stock))
        return;
    /* What the store is given must fit its column (model.h: 4 bytes a
     * character, TITLE_MAX characters). */
    CHECK(strlen(title) <= TITLE_MAX * 4);
}

static void payment_callback(const json_t *b)
{
    const char *txn_id, *order_no, *status;
    int64_t amount;
    if (!read_string(b, "txn_id", TXN_ID_MAX * 4, &txn_id) || !txn_id_valid(txn_id))
        return;
    if (!read_string(b, "order_no", ORDER_NO_MAX, &order_no))
        return;
    if (!read_int(b, "amount_cents", 0, CENTS_MAX, &amount))
        return;
    if (!read_string(b, "status", 16, &status) ||
        (strcmp(status, "SUCCESS") != 0 && strcmp(status, "FAILED") != 0))
        return;
    CHECK(strlen(txn_id) <= TXN_ID_MAX * 4 && amount >= 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[200];
    why[0] = '\0';
    /* The body buffer is NUL-terminated (body.c), but the reader is given
     * its length; an exact-size copy lets ASan see reads past it. */
    char *body = malloc(size ? size : 1);
    if (body == NULL)
        abort();
    if (size > 0)
        memcpy(body, data, size);
    json_t *o = jsonv_parse_object(body, size, why, sizeof why);
    if (o == NULL) {
        CHECK(why[0] != '\0' && strlen(why) < sizeof why);
        free(body);
        return 0;
    }
    CHECK(json_is_object(o));
    json_t *lenient = json_loadb(body, size, 0, NULL);
    CHECK(lenient != NULL && json_equal(o, lenient));
    json_decref(lenient);

    order_create(o);
    session_create(o);
    payment_callback(o);

    json_decref(o);
    free(body);
    return 0;
}
