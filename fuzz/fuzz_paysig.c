/* fuzz_paysig.c - the payment callback's signature and timestamp headers
 * (paysig_verify), the Standard Webhooks signature list
 * (paysig_verify_webhook) and the TICKETD_PAY_SECRET reader
 * (paysig_keys_parse).
 *
 * Input: "<X-Pay-Timestamp>\n<X-Pay-Signature>\n<raw body>". Each input is
 * checked four ways: with its own signature; with the right signature,
 * computed here through OpenSSL (so the timestamp rules are reached); with
 * that signature in uppercase; and with one character of it changed. The
 * signature field is also read as a webhook-signature list (the
 * timestamp as webhook-timestamp, a fixed webhook-id), alone and with the
 * right v1 signature added to it, and as a TICKETD_PAY_SECRET.
 *
 * Invariants: nothing but the exact lowercase HMAC-SHA256 of
 * "<timestamp>.<body>" under the secret is ever accepted (OK or STALE);
 * with it, the answer is OK exactly when the timestamp is a plain decimal
 * within the tolerance of now, STALE when it is a decimal outside it, and
 * BAD otherwise; an empty secret accepts nothing. A signature list is
 * accepted only when one of its blank-separated entries is exactly the
 * right "v1,<base64>", and a list holding it is judged by the timestamp
 * alone. A secret setting is read as one or two secrets, or refused. */
#include "fuzz.h"

#include "paysig.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdbool.h>

#define WEBHOOK_ID "msg_fuzz"

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

/* The right webhook-signature entry, "v1,<base64>", computed apart from
 * the service: HMAC-SHA256(SECRET's bytes, "<id>.<ts>.<body>"). */
static void sign_webhook(const char *ts, const char *body, size_t len,
                         char out[PAYSIG_WEBHOOK_LEN + 1])
{
    size_t ilen = strlen(WEBHOOK_ID), tlen = strlen(ts);
    unsigned char *msg = malloc(ilen + tlen + 2 + len);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    if (msg == NULL)
        abort();
    memcpy(msg, WEBHOOK_ID, ilen);
    msg[ilen] = '.';
    memcpy(msg + ilen + 1, ts, tlen);
    msg[ilen + 1 + tlen] = '.';
    if (len > 0)
        memcpy(msg + ilen + tlen + 2, body, len);
    if (HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET), msg, ilen + tlen + 2 + len, mac,
             &mac_len) == NULL ||
        mac_len != 32)
        abort();
    free(msg);
    memcpy(out, "v1,", 3);
    EVP_EncodeBlock((unsigned char *)out + 3, mac, (int)mac_len);
}

/* Whether list holds want as one of its blank-separated entries. */
static bool holds_entry(const char *list, const char *want)
{
    size_t n = strlen(want);
    for (const char *p = list; *p != '\0';) {
        while (*p == ' ' || *p == '\t')
            p++;
        size_t m = strcspn(p, " \t");
        if (m == n && memcmp(p, want, n) == 0)
            return true;
        p += m;
    }
    return false;
}

/* The Standard Webhooks checks of one input (see the top). */
static void check_webhook(const char *ts, const char *sig, const char *body, size_t len,
                          enum paysig_result want_genuine)
{
    struct paysig_keys keys;
    char why[160], good[PAYSIG_WEBHOOK_LEN + 1];
    CHECK(paysig_keys_parse(SECRET, &keys, why, sizeof why));
    sign_webhook(ts, body, len, good);
    enum paysig_result r =
        paysig_verify_webhook(&keys, WEBHOOK_ID, ts, sig, body, len, NOW, TOLERANCE);
    CHECK(r == PAYSIG_OK || r == PAYSIG_BAD || r == PAYSIG_STALE);
    if (r != PAYSIG_BAD)
        CHECK(holds_entry(sig, good));
    size_t slen = strlen(sig);
    char *list = malloc(slen + 1 + sizeof good);
    if (list == NULL)
        abort();
    snprintf(list, slen + 1 + sizeof good, "%s %s", sig, good);
    CHECK(paysig_verify_webhook(&keys, WEBHOOK_ID, ts, list, body, len, NOW, TOLERANCE) ==
          want_genuine);
    free(list);

    /* The signature field as a secret setting: one or two secrets, or
     * refused with a reason and nothing kept. */
    memset(why, 0, sizeof why);
    if (paysig_keys_parse(sig, &keys, why, sizeof why))
        CHECK(keys.n >= 1 && keys.n <= PAYSIG_KEYS_MAX);
    else
        CHECK(keys.n == 0 && why[0] != '\0');
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
    check_webhook(ts, sig, body, len, expected(ts));

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
