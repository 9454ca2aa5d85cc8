/* fuzz_parse_i64.c - the decimal reader (parse_i64, util.c) behind
 * Content-Length, ids in paths, ?limit=, JWT subjects, payment timestamps
 * and config values.
 *
 * Input: one byte choosing the bounds (those the service uses, and a few
 * signed ones), then the text. Invariants: the answer agrees with a
 * reference reading (optional '-' only when min < 0, then 1+ digits and
 * nothing else, a value that fits in int64 and lies in [min, max]), and
 * *out is written only on success. */
#include "fuzz.h"

#include "util.h"

#include <stdbool.h>

/* The largest input worth trying, a little past the limits the parser
 * enforces (fuzz.mk reads it for -max_len). */
#define FUZZ_MAX_LEN 48

static const struct {
    int64_t min, max;
} bounds[] = {
    {1, 9007199254740991LL}, /* user, session and order ids; JWT sub */
    {0, INT64_MAX},          /* Content-Length, payment timestamps, outbox ids */
    {1, 100},                /* ?limit= */
    {1, 65535},              /* ports */
    {256, 1048576},          /* TICKETD_MAX_BODY */
    {0, 0},
    {INT64_MIN, INT64_MAX},
    {-5, 5},
    {INT64_MIN, -1},
};

#define N_BOUNDS (sizeof bounds / sizeof bounds[0])

static bool reference(const char *s, int64_t min, int64_t max, int64_t *out)
{
    bool neg = false;
    if (*s == '-' && min < 0) {
        neg = true;
        s++;
    }
    if (*s == '\0')
        return false;
    __int128 v = 0;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9')
            return false;
        v = v * 10 + (*s - '0');
        if (v > (__int128)INT64_MAX + 1)
            return false;
    }
    if (neg)
        v = -v;
    if (v < min || v > max)
        return false;
    *out = (int64_t)v;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int64_t min = bounds[data[0] % N_BOUNDS].min;
    int64_t max = bounds[data[0] % N_BOUNDS].max;
    char *s = fz_strndup(data + 1, size - 1);

    int64_t got = 0x5a5a5a5a, want = 0;
    bool ok = parse_i64(s, min, max, &got);
    CHECK(ok == reference(s, min, max, &want));
    if (ok)
        CHECK(got == want && got >= min && got <= max);
    else
        CHECK(got == 0x5a5a5a5a);
    CHECK(!parse_i64(NULL, min, max, &got));
    free(s);
    return 0;
}
