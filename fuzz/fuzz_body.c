/* fuzz_body.c - the request-body buffer (body_append) fed the chunks
 * libmicrohttpd hands over, under a limit.
 *
 * Input: two bytes of limit (0..4095), then chunks of one length byte and
 * that many bytes. Invariants, checked after every append against a plain
 * copy kept here: the length never passes the limit; an append that would
 * is refused and changes nothing; the data is the chunks accepted so far,
 * NUL-terminated; the capacity covers the data and never passes limit+1. */
#include "fuzz.h"

#include "body.h"
#include "err.h"

/* The largest input worth trying, a little past the limits the parser
 * enforces (fuzz.mk reads it for -max_len). */
#define FUZZ_MAX_LEN 8192

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t max = ((size_t)data[0] << 8 | data[1]) & 0xfff;
    data += 2;
    size -= 2;

    struct body b;
    body_init(&b, max);
    char *shadow = malloc(max + 1);
    size_t shadow_len = 0;
    if (shadow == NULL)
        abort();

    while (size > 0) {
        size_t n = data[0];
        data++;
        size--;
        if (n > size)
            n = size;
        size_t cap_before = b.cap;
        char *data_before = b.data;
        int rc = body_append(&b, data, n);
        if (shadow_len + n <= max) {
            CHECK(rc == TD_OK);
            if (n > 0)
                memcpy(shadow + shadow_len, data, n);
            shadow_len += n;
        } else {
            CHECK(rc == TD_EINVAL);
            CHECK(b.cap == cap_before && b.data == data_before);
        }
        CHECK(b.len == shadow_len && b.len <= max && b.max == max);
        if (b.data != NULL) {
            CHECK(b.cap >= b.len + 1 && b.cap <= max + 1);
            CHECK(memcmp(b.data, shadow, b.len) == 0 && b.data[b.len] == '\0');
        } else {
            CHECK(b.len == 0 && b.cap == 0);
        }
        data += n;
        size -= n;
    }
    body_cleanup(&b);
    CHECK(b.data == NULL && b.len == 0 && b.cap == 0 && b.max == max);
    free(shadow);
    return 0;
}
