/* fuzz_prefer.c - the Prefer header's wait=N (prefer_wait_s).
 *
 * Input: the header value, any bytes. Invariants: the answer is 0 or in
 * 1..max; it reads only the bytes it is given (ASan sees a read past
 * them: the input is copied to a buffer of exactly its size); it does not
 * depend on the case of "wait"; and a header that is "wait=<digits>" is
 * answered by a reference reading of the rule. */
#include "fuzz.h"

#include "prefer.h"

#include <ctype.h>
#include <stdbool.h>

/* The largest input worth trying (fuzz.mk reads it for -max_len). */
#define FUZZ_MAX_LEN 256

#define MAX_S 10

/* The rule for a plain "wait=<digits>", written independently. */
static int reference_plain(const uint8_t *d, size_t n, bool *plain)
{
    long long v = 0;
    *plain = n > 5 && memcmp(d, "wait=", 5) == 0;
    for (size_t i = 5; *plain && i < n; i++) {
        if (!isdigit(d[i]))
            *plain = false;
        else if (v <= MAX_S)
            v = v * 10 + (d[i] - '0');
    }
    return v > MAX_S ? MAX_S : (int)v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *exact = malloc(size ? size : 1);
    memcpy(exact, data, size);
    int got = prefer_wait_s(exact, size, MAX_S);
    CHECK(got >= 0 && got <= MAX_S);

    /* The same with "wait" in another case wherever it stands. */
    for (size_t i = 0; i + 4 <= size; i++)
        if (strncasecmp(exact + i, "wait", 4) == 0)
            memcpy(exact + i, "WaIt", 4);
    CHECK(prefer_wait_s(exact, size, MAX_S) == got);

    bool plain;
    int want = reference_plain(data, size, &plain);
    if (plain)
        CHECK(got == want);
    free(exact);
    return 0;
}
