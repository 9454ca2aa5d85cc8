/* text.c - a growing text (text.h). */
#include "text.h"

#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void text_put(struct text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (w >= 0 && (size_t)w < t->cap - t->len) {
            t->len += (size_t)w;
            return;
        }
        /* Room for this piece at once, however long. */
        t->cap = t->cap * 2 + (w > 0 ? (size_t)w : 0);
        t->s = xrealloc(t->s, t->cap);
    }
}

void text_putn(struct text *t, const char *s, size_t n)
{
    if (t->cap - t->len <= n) {
        t->cap = t->cap * 2 + n + 1;
        t->s = xrealloc(t->s, t->cap);
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}
