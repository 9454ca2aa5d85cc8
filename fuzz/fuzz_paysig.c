/* fuzz_paysig.c - the payment callback's signature and timestamp headers
 * (paysig_verify).
 *
 * Input: "<X-Pay-Timestamp>\n<X-Pay-Signature>\n<raw body>". Each input is
 * checked four ways: with its own signature; with the right signature,
 * computed here through OpenSSL (so the timestamp rules are reached); with
 * that signature in uppercase; and with one character of it changed.
 *
 * Invariants: nothing but the exact lowercase HMAC-SHA256 of
 * "<timestamp>.<body>" under the secret is ever accepted (OK or STALE);
 * with it, the answer is OK exactly when the timestamp is a plain decimal
 * within the tolerance of now, STALE when it is a decimal outside it, and
 * BAD otherwise; an empty secret accepts nothing. */
#include "fuzz.h"

#include "paysig.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdbool.h>

/* The largest input worth trying, a little past the limits the parser
 * enforces (fuzz.mk reads it for -max_len). */
#define FUZZ_MAX_LEN 2048

#define SECRET    "pay-secret-for-fuzzing"
#define NOW       1767225600
#define TOLERANCE 300

static void sign(const char *ts, const char *body, size_t len, char out[PAYSIG_HEX_LEN + 1])
{
    size_t tlen = strlen(ts);
    unsigned char *msg = malloc(tlen + 1 + len);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    if (msg == NULL)
        abort();
    memcpy(msg, ts, tlen);
    msg[tlen] = '.';
    if (len > 0)
        memcpy(msg + tlen + 1, body, len);
    if (HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET), msg, tlen + 1 + len, mac, &mac_len) ==
            NULL ||
        mac_len != 32)
        abort();
    free(msg);
    for (unsigned i = 0; i < mac_len; i++)
        snprintf(out + 2 * i, 3, "%02x", mac[i]);
}

/* The expected answer for a genuine signature: a timestamp is 1..19
 * digits (no sign, no space) with a value that fits in int64. */
static enum paysig_result expected(const char *ts)
{
    size_t n = strlen(ts);
    if (n == 0)
        return PAYSIG_BAD;
    __int128 v = 0;
    for (size_t i = 0; i < n; i++) {
        if (ts[i] < '0' || ts[i] > '9')
            return PAYSIG_BAD;
        v = v * 10 + (ts[i] - '0');
        if (v > INT64_MAX)
            return PAYSIG_BAD;
    }
    __int128 skew = (__int128)NOW - v;
    return skew > TOLERANCE || skew < -TOLERANCE ? PAYSIG_STALE : PAYSIG_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz_input in = {data, size};
    char *ts = fz_field(&in, '\n');
    char *sig = fz_field(&in, '\n');
    /* The raw body, exact size: ASan sees reads past it. NULL when empty,
     * as the HTTP layer passes it. */
    char *body = in.n > 0 ? malloc(in.n) : NULL;
    if (body != NULL)
        memcpy(body, in.p, in.n);
    size_t len = in.n;

    char good[PAYSIG_HEX_LEN + 1];
    sign(ts, body, len, good);

    enum paysig_result r = paysig_verify(SECRET, ts, sig, body, len, NOW, TOLERANCE);
    CHECK(r == PAYSIG_OK || r == PAYSIG_BAD || r == PAYSIG_STALE);
    if (r != PAYSIG_BAD)
        CHECK(strcmp(sig, good) == 0);
    CHECK(paysig_verify("", ts, sig, body, len, NOW, TOLERANCE) == PAYSIG_BAD);
    CHECK(paysig_verify(SECRET, NULL, sig, body, len, NOW, TOLERANCE) == PAYSIG_BAD);
    CHECK(paysig_verify(SECRET, ts, NULL, body, len, NOW, TOLERANCE) == PAYSIG_BAD);

    CHECK(paysig_verify(SECRET, ts, good, body, len, NOW, TOLERANCE) == expected(ts));

    char upper[PAYSIG_HEX_LEN + 1];
    bool has_letter = false;
    for (int i = 0; i <= PAYSIG_HEX_LEN; i++) {
        upper[i] = good[i] >= 'a' && good[i] <= 'f' ? (char)(good[i] - 32) : good[i];
        has_letter |= upper[i] != good[i];
    }
    if (has_letter)
        CHECK(paysig_verify(SECRET, ts, upper, body, len, NOW, TOLERANCE) == PAYSIG_BAD);

    char flipped[PAYSIG_HEX_LEN + 1];
    memcpy(flipped, good, sizeof flipped);
    int at = (int)(size % PAYSIG_HEX_LEN);
    flipped[at] = flipped[at] == '0' ? '1' : '0';
    CHECK(paysig_verify(SECRET, ts, flipped, body, len, NOW, TOLERANCE) == PAYSIG_BAD);

    free(body);
    free(sig);
    free(ts);
    return 0;
}
