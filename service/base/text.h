/* text.h - a growing text: printf appends (or bytes as they are), the
 * buffer doubles (or more) when it must, and allocation failure aborts
 * (util.h), so callers never check. For texts built piece by piece whose
 * length is known only at the end: the metrics page, a merged batch's
 * JSON. Not thread-safe; one owner. */
#ifndef TICKETD_TEXT_H
#define TICKETD_TEXT_H

#include <stddef.h>

struct text {
    char *s; /* NUL-terminated once anything was put; the owner frees it */
    size_t len, cap;
};

/* Appends the formatted text, growing t as needed. */
void text_put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends n bytes of s as they are (no format to parse: for a text copied
 * in runs, such as a string between the bytes it must escape). */
void text_putn(struct text *t, const char *s, size_t n);

#endif
