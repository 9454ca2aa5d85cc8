/* fuzz_idem_key.c - the Idempotency-Key header (idem_parse_key).
 *
 * Input: the header value. Invariants: an accepted key is 1..IDEM_KEY_MAX
 * characters of [A-Za-z0-9._:-] and is the header itself or the header
 * without its sf-string quotes; and a header of that shape is never
 * refused (a reference reading of the rule decides both ways). */
#include "fuzz.h"

#include "idem.h"

#include <stdbool.h>

/* The largest input worth trying, a little past the limits the parser
 * enforces (fuzz.mk reads it for -max_len). */
#define FUZZ_MAX_LEN 160

static bool key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("._:-", c) != NULL);
}

/* The rule as idem.h states it, written independently. */
static bool reference_key(const char *h, const char **start, size_t *len)
{
    size_t n = strlen(h);
    if (n >= 2 && h[0] == '"' && h[n - 1] == '"') {
        h++;
        n -= 2;
    }
    if (n < 1 || n > IDEM_KEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!key_char(h[i]))
            return false;
    }
    *start = h;
    *len = n;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *header = fz_strndup(data, size);
    /* Poisoned beyond the terminator, so a key that is too long is seen. */
    char out[IDEM_KEY_MAX + 1 + 16];
    memset(out, 0x7f, sizeof out);

    bool ok = idem_parse_key(header, out);
    const char *start = NULL;
    size_t len = 0;
    bool want = reference_key(header, &start, &len);
    CHECK(ok == want);
    if (ok) {
        size_t n = strlen(out);
        CHECK(n >= 1 && n <= IDEM_KEY_MAX);
        for (size_t i = 0; i < n; i++)
            CHECK(key_char(out[i]));
        CHECK(n == len && memcmp(out, start, n) == 0);
    }
    for (size_t i = IDEM_KEY_MAX + 1; i < sizeof out; i++)
        CHECK(out[i] == 0x7f);
    CHECK(!idem_parse_key(NULL, out));
    free(header);
    return 0;
}
