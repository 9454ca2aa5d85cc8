#include "model.h"

#include <string.h>

static const char *const status_names[ORDER_STATUS_COUNT] = {
    [ORDER_PENDING_PAYMENT] = "PENDING_PAYMENT",
    [ORDER_PAID] = "PAID",
    [ORDER_TICKETED] = "TICKETED",
    [ORDER_COMPLETED] = "COMPLETED",
    [ORDER_CANCELLED] = "CANCELLED",
};

const char *order_status_name(enum order_status s)
{
    if ((int)s < 0 || s >= ORDER_STATUS_COUNT)
        return "UNKNOWN";
    return status_names[s];
}

bool order_status_parse(const char *name, enum order_status *out)
{
    for (int i = 0; i < ORDER_STATUS_COUNT; i++) {
        if (strcmp(name, status_names[i]) == 0) {
            *out = (enum order_status)i;
            return true;
        }
    }
    return false;
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
