/* body.h - a bounded, doubling buffer for request bodies (curl's dynbuf
 * idea): appends past the limit are refused, never grown into, so a client
 * controls at most `max` bytes of our memory. Not thread-safe. */
#ifndef TICKETD_BODY_H
#define TICKETD_BODY_H

#include <stdbool.h>
#include <stddef.h>

struct body {
    char *data; /* NUL-terminated after every append */
    size_t len;
    size_t cap;
    size_t max;
};

void body_init(struct body *b, size_t max);
/* Appends n bytes. Returns TD_OK, or TD_EINVAL (and leaves b unchanged)
 * when the total would exceed max. */
int body_append(struct body *b, const void *data, size_t n);
void body_cleanup(struct body *b);

#endif
