/* statemachine.c - the order's allowed moves as one table
 * (statemachine.h). Apart and pure, so that no other file decides a
 * status. */
#include "statemachine.h"

#include <stddef.h>

static const struct {
    enum order_status from;
    enum order_event event;
    enum order_status to;
} transitions[] = {
    {ORDER_PENDING_PAYMENT, EVENT_PAY, ORDER_PAID},
    {ORDER_PAID, EVENT_TICKET, ORDER_TICKETED},
    {ORDER_TICKETED, EVENT_COMPLETE, ORDER_COMPLETED},
    {ORDER_PENDING_PAYMENT, EVENT_CANCEL, ORDER_CANCELLED},
    {ORDER_PENDING_PAYMENT, EVENT_EXPIRE, ORDER_CANCELLED},
};

static const char *const event_names[EVENT_COUNT] = {
    [EVENT_PAY] = "pay",       [EVENT_TICKET] = "ticket", [EVENT_COMPLETE] = "complete",
    [EVENT_CANCEL] = "cancel", [EVENT_EXPIRE] = "expire",
};

bool statemachine_next(enum order_status from, enum order_event ev, enum order_status *to)
{
    for (size_t i = 0; i < sizeof transitions / sizeof transitions[0]; i++) {
        if (transitions[i].from == from && transitions[i].event == ev) {
            *to = transitions[i].to;
            return true;
        }
    }
    return false;
}

const char *order_event_name(enum order_event ev)
{
    if ((int)ev < 0 || ev >= EVENT_COUNT)
        return "unknown";
    return event_names[ev];
}
