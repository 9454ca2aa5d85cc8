/* payment.c - the payment outcomes' names (payment.h). */
#include "payment.h"

#include <string.h>

static const char *const outcome_names[PAY_OUTCOME_COUNT] = {
    [PAY_APPLIED] = "APPLIED",
    [PAY_FAILED] = "PAYMENT_FAILED",
    [PAY_DUPLICATE] = "DUPLICATE_PAYMENT",
    [PAY_LATE] = "LATE_PAYMENT",
    [PAY_MISMATCH] = "AMOUNT_MISMATCH",
};

const char *pay_outcome_name(enum pay_outcome oc)
{
    if ((int)oc < 0 || oc >= PAY_OUTCOME_COUNT)
        return "UNKNOWN";
    return outcome_names[oc];
}

bool pay_outcome_parse(const char *name, enum pay_outcome *out)
{
    for (int i = 0; i < PAY_OUTCOME_COUNT; i++) {
        if (strcmp(name, outcome_names[i]) == 0) {
            *out = (enum pay_outcome)i;
            return true;
        }
    }
    return false;
}
