/* fuzz.h - what the libFuzzer harnesses share: a check that crashes on a
 * broken invariant (assert() can be compiled out; this cannot), and a
 * reader that cuts the input into the fields a request would carry.
 *
 * Headers reach ticketd as C strings from libmicrohttpd, which never hands
 * over a NUL or a line break inside a value; so header fields are cut at
 * '\n' and end at their first NUL, exactly what the service would see. */
#ifndef TICKETD_FUZZ_H
#define TICKETD_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

struct fz_input {
    const uint8_t *p;
    size_t n;
};

/* A new NUL-terminated copy of n bytes; an embedded NUL ends the string
 * early, as it would in a C string from the HTTP layer. */
static inline char *fz_strndup(const void *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s == NULL)
        abort();
    if (n > 0)
        memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

/* The next field up to sep (consumed, not included), or the rest of the
 * input when sep does not occur; a new string (caller frees). */
static inline char *fz_field(struct fz_input *in, uint8_t sep)
{
    const uint8_t *end = in->n > 0 ? memchr(in->p, sep, in->n) : NULL;
    size_t len = end != NULL ? (size_t)(end - in->p) : in->n;
    char *s = fz_strndup(in->p, len);
    size_t used = end != NULL ? len + 1 : len;
    in->p += used;
    in->n -= used;
    return s;
}

#endif
