/* body.c - the bounded, doubling buffer a request body is read into
 * (body.h). Apart and pure, so that the bound a client meets is tested
 * without a connection. */
#include "body.h"

#include "err.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

void body_init(struct body *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

int body_append(struct body *b, const void *data, size_t n)
{
    if (n > b->max - b->len)
        return TD_EINVAL;
    size_t need = b->len + n + 1;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need)
            cap *= 2;
        if (cap > b->max + 1)
            cap = b->max + 1;
        b->data = xrealloc(b->data, cap);
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return TD_OK;
}

void body_cleanup(struct body *b)
{
    free(b->data);
    body_init(b, b->max);
}
