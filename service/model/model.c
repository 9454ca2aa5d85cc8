/* model.c - the names of the domain's enums on the wire and in the
 * database (model.h), and their parsers. Apart so that each name is
 * written once. */
#include "model.h"
#include "payment.h"

#include <string.h>

static const char *const status_names[ORDER_STATUS_COUNT] = {
    [ORDER_PENDING_PAYMENT] = "PENDING_PAYMENT",
    [ORDER_PAID] = "PAID",
    [ORDER_TICKETED] = "TICKETED",
    [ORDER_COMPLETED] = "COMPLETED",
    [ORDER_CANCELLED] = "CANCELLED",
};

/* The name at i of a table of n names, "UNKNOWN" out of range; and the
 * index of name in one, the two halves of every enum's names here. */
static const char *name_at(const char *const *names, int n, int i)
{
    return i >= 0 && i < n ? names[i] : "UNKNOWN";
}

static int index_of(const char *const *names, int n, const char *name)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(name, names[i]) == 0)
            return i;
    }
    return -1;
}

const char *order_status_name(enum order_status s)
{
    return name_at(status_names, ORDER_STATUS_COUNT, (int)s);
}

bool order_status_parse(const char *name, enum order_status *out)
{
    int i = index_of(status_names, ORDER_STATUS_COUNT, name);
    if (i >= 0)
        *out = (enum order_status)i;
    return i >= 0;
}

static const char *const outcome_names[PAY_OUTCOME_COUNT] = {
    [PAY_APPLIED] = "APPLIED",
    [PAY_FAILED] = "PAYMENT_FAILED",
    [PAY_DUPLICATE] = "DUPLICATE_PAYMENT",
    [PAY_LATE] = "LATE_PAYMENT",
    [PAY_MISMATCH] = "AMOUNT_MISMATCH",
};

const char *pay_outcome_name(enum pay_outcome oc)
{
    return name_at(outcome_names, PAY_OUTCOME_COUNT, (int)oc);
}

bool pay_outcome_parse(const char *name, enum pay_outcome *out)
{
    int i = index_of(outcome_names, PAY_OUTCOME_COUNT, name);
    if (i >= 0)
        *out = (enum pay_outcome)i;
    return i >= 0;
}

bool order_no_valid(const char *s)
{
    if (s == NULL)
        return false;
    size_t n = 0;
    for (; s[n] != '\0'; n++) {
        if (n == ORDER_NO_LEN || s[n] < '0' || s[n] > '9')
            return false;
    }
    return n == ORDER_NO_LEN;
}

int64_t consume_points_for(int64_t amount_cents)
{
    return amount_cents / CENTS_PER_POINT;
}
