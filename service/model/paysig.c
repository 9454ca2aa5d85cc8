/* paysig.c - the payment gateway's signatures checked, in both schemes
 * (paysig.h). Apart and pure, so that the callback's proof of origin is
 * tested without HTTP. */
#include "paysig.h"

#include "digest.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* HMAC-SHA256 over the parts, joined by dots, and the body byte for byte:
 * re-encoding the JSON would break genuine signatures. parts[i] are the
 * header values as sent. */
static void mac_over(const unsigned char *key, size_t key_len, const char *const *parts, int n,
                     const char *body, size_t len, unsigned char mac[SHA256_BYTES])
{
    size_t total = len;
    for (int i = 0; i < n; i++)
        total += strlen(parts[i]) + 1;
    unsigned char *msg = xmalloc(total > 0 ? total : 1);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        size_t plen = strlen(parts[i]);
        memcpy(msg + at, parts[i], plen);
        at += plen;
        msg[at++] = '.';
    }
    if (len > 0)
        memcpy(msg + at, body, len);
    hmac_sha256(key, key_len, msg, total, mac);
    free(msg);
}

void paysig_sign(const char *secret, const char *timestamp, const char *body, size_t len,
                 char out[PAYSIG_HEX_LEN + 1])
{
    unsigned char mac[SHA256_BYTES];
    const char *parts[] = {timestamp};
    mac_over((const unsigned char *)secret, strlen(secret), parts, 1, body, len, mac);
    hex_encode(mac, sizeof mac, out);
}

/* The timestamp rule both schemes share, once a signature matched. */
static enum paysig_result check_time(const char *timestamp, int64_t now, int64_t tolerance_s)
{
    int64_t ts;
    if (!parse_i64(timestamp, 0, INT64_MAX, &ts))
        return PAYSIG_BAD;
    int64_t skew = now - ts;
    if (skew > tolerance_s || skew < -tolerance_s)
        return PAYSIG_STALE;
    return PAYSIG_OK;
}

enum paysig_result paysig_verify(const char *secret, const char *timestamp, const char *signature,
                                 const char *body, size_t len, int64_t now, int64_t tolerance_s)
{
    char want[PAYSIG_HEX_LEN + 1];
    if (secret == NULL || secret[0] == '\0' || timestamp == NULL || signature == NULL)
        return PAYSIG_BAD;
    /* The length is no secret; the bytes are compared in constant time.
     * Only lowercase hex can match, as the contract says. */
    if (strlen(signature) != PAYSIG_HEX_LEN)
        return PAYSIG_BAD;
    paysig_sign(secret, timestamp, body, len, want);
    if (!ct_equal(want, signature, PAYSIG_HEX_LEN))
        return PAYSIG_BAD;
    return check_time(timestamp, now, tolerance_s);
}

/* Standard base64 with padding, from the project's base64url helpers: the
 * same alphabet but for two characters. */
static void b64_encode(const unsigned char *in, size_t n, char *out)
{
    b64url_encode(in, n, out);
    size_t len = strlen(out);
    for (size_t i = 0; i < len; i++)
        out[i] = out[i] == '-' ? '+' : out[i] == '_' ? '/' : out[i];
    while (len % 4 != 0)
        out[len++] = '=';
    out[len] = '\0';
}

/* Decodes canonical padded base64 (n bytes of in) into out (cap bytes):
 * the decoded length, or -1. */
static long b64_decode(const char *in, size_t n, unsigned char *out, size_t cap)
{
    if (n == 0 || n % 4 != 0)
        return -1;
    char *url = xmalloc(n + 1);
    size_t m = n;
    while (m > n - 2 && in[m - 1] == '=')
        m--;
    long got = -1;
    for (size_t i = 0; i < m; i++) {
        char c = in[i];
        if (c == '-' || c == '_' || c == '=')
            goto out; /* not this alphabet, or padding inside */
        url[i] = c == '+' ? '-' : c == '/' ? '_' : c;
    }
    got = b64url_decode(url, m, out, cap);
out:
    free(url);
    return got;
}

/* One secret as written: its X-Pay-* key (the text) and its Standard
 * Webhooks key. */
static bool key_read(const char *s, size_t n, struct paysig_key *k, char *why, size_t cap)
{
    static const char prefix[] = "whsec_";
    size_t plen = sizeof prefix - 1;
    if (n == 0) {
        snprintf(why, cap, "TICKETD_PAY_SECRET holds an empty secret");
        return false;
    }
    if (n > PAYSIG_SECRET_MAX) {
        snprintf(why, cap, "a secret in TICKETD_PAY_SECRET is longer than %d characters",
                 PAYSIG_SECRET_MAX);
        return false;
    }
    memcpy(k->text, s, n);
    k->text[n] = '\0';
    if (n > plen && memcmp(s, prefix, plen) == 0) {
        long got = b64_decode(s + plen, n - plen, k->raw, sizeof k->raw);
        if (got <= 0) {
            snprintf(why, cap, "a whsec_ secret in TICKETD_PAY_SECRET is not base64");
            return false;
        }
        k->raw_len = (size_t)got;
        return true;
    }
    memcpy(k->raw, s, n);
    k->raw_len = n;
    return true;
}

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

bool paysig_keys_parse(const char *setting, struct paysig_keys *out, char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    if (setting == NULL || setting[0] == '\0') {
        snprintf(why, cap, "TICKETD_PAY_SECRET is not set");
        return false;
    }
    const char *p = setting;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        const char *s = p;
        while (n > 0 && blank(*s)) {
            s++;
            n--;
        }
        while (n > 0 && blank(s[n - 1]))
            n--;
        if (out->n == PAYSIG_KEYS_MAX) {
            snprintf(why, cap, "TICKETD_PAY_SECRET holds more than %d secrets", PAYSIG_KEYS_MAX);
            goto fail;
        }
        if (!key_read(s, n, &out->k[out->n], why, cap))
            goto fail;
        out->n++;
        if (end == NULL)
            return true;
        p = end + 1;
    }
fail:
    memset(out, 0, sizeof *out);
    return false;
}

enum paysig_result paysig_verify_keys(const struct paysig_keys *keys, const char *timestamp,
                                      const char *signature, const char *body, size_t len,
                                      int64_t now, int64_t tolerance_s)
{
    for (int i = 0; i < keys->n; i++) {
        enum paysig_result r =
            paysig_verify(keys->k[i].text, timestamp, signature, body, len, now, tolerance_s);
        if (r != PAYSIG_BAD)
            return r;
    }
    return PAYSIG_BAD;
}

void paysig_sign_webhook(const unsigned char *key, size_t key_len, const char *id,
                         const char *timestamp, const char *body, size_t len,
                         char out[PAYSIG_WEBHOOK_LEN + 1])
{
    unsigned char mac[SHA256_BYTES];
    const char *parts[] = {id, timestamp};
    mac_over(key, key_len, parts, 2, body, len, mac);
    memcpy(out, "v1,", 3);
    b64_encode(mac, sizeof mac, out + 3); /* 44 characters and a NUL */
}

enum paysig_result paysig_verify_webhook(const struct paysig_keys *keys, const char *id,
                                         const char *timestamp, const char *signatures,
                                         const char *body, size_t len, int64_t now,
                                         int64_t tolerance_s)
{
    char want[PAYSIG_KEYS_MAX][PAYSIG_WEBHOOK_LEN + 1];
    bool match = false;
    if (keys->n == 0 || id == NULL || timestamp == NULL || signatures == NULL)
        return PAYSIG_BAD;
    for (int i = 0; i < keys->n; i++)
        paysig_sign_webhook(keys->k[i].raw, keys->k[i].raw_len, id, timestamp, body, len, want[i]);
    /* Every entry is looked at, whatever matched before: the time taken
     * depends on the list's length, which the sender knows, not on which
     * entry or key matched. */
    for (const char *p = signatures; *p != '\0';) {
        while (blank(*p))
            p++;
        size_t n = 0;
        while (p[n] != '\0' && !blank(p[n]))
            n++;
        if (n == PAYSIG_WEBHOOK_LEN) {
            for (int i = 0; i < keys->n; i++)
                match |= ct_equal(want[i], p, PAYSIG_WEBHOOK_LEN);
        }
        p += n;
    }
    if (!match)
        return PAYSIG_BAD;
    return check_time(timestamp, now, tolerance_s);
}
