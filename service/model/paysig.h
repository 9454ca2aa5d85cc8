/* paysig.h - the payment gateway's proof of origin, in either of the two
 * schemes the callback accepts, and a timestamp within a tolerance of our
 * clock.
 *
 *   X-Pay-*            X-Pay-Signature: lowercase hex HMAC-SHA256 over
 *                      "<X-Pay-Timestamp>.<raw body>", keyed with the
 *                      secret's bytes;
 *   Standard Webhooks  webhook-signature: a space-separated list of
 *                      "v1,<base64 HMAC-SHA256>" over
 *                      "<webhook-id>.<webhook-timestamp>.<raw body>", of
 *                      which one must match; keyed with the secret's bytes,
 *                      or, for a secret written whsec_<base64>, with what
 *                      the base64 decodes to.
 *
 * TICKETD_PAY_SECRET holds one secret, or two separated by a comma while a
 * gateway rotates its secret (the new one first): a signature made with
 * either is accepted, in either scheme (paysig_keys).
 *
 * The signature is checked before the timestamp, as gateways' own
 * libraries do: a forged request learns nothing about our clock, and a
 * genuine but stale one (a replay of a captured callback) is told why.
 * Every compare of signature bytes runs in constant time. Pure;
 * thread-safe. */
#ifndef TICKETD_PAYSIG_H
#define TICKETD_PAYSIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PAYSIG_HEX_LEN 64 /* SHA-256: 32 bytes, in hex */
/* A Standard Webhooks signature: "v1," and 32 bytes in padded base64. */
#define PAYSIG_WEBHOOK_LEN (3 + 44)

enum paysig_result {
    PAYSIG_OK,
    PAYSIG_BAD,   /* missing, malformed or wrong signature or timestamp header */
    PAYSIG_STALE, /* genuine, but the timestamp is too far from now */
};

/* Checks one callback. timestamp and signature are the raw header values
 * (NULL when absent); body is the raw request body (len bytes, may be
 * NULL when len is 0). An empty secret accepts nothing. now is the wall
 * clock in Unix seconds; a timestamp exactly tolerance_s away is still
 * accepted. */
enum paysig_result paysig_verify(const char *secret, const char *timestamp, const char *signature,
                                 const char *body, size_t len, int64_t now, int64_t tolerance_s);

/* Computes the signature the gateway sends: lowercase hex into out
 * (PAYSIG_HEX_LEN + 1 bytes, NUL-terminated). */
void paysig_sign(const char *secret, const char *timestamp, const char *body, size_t len,
                 char out[PAYSIG_HEX_LEN + 1]);

/* The most secrets TICKETD_PAY_SECRET holds (a rotation's two), and the
 * longest secret, as written, it may hold. */
#define PAYSIG_KEYS_MAX   2
#define PAYSIG_SECRET_MAX 256

/* The secrets of a TICKETD_PAY_SECRET, each as written (the X-Pay-* key)
 * and as the Standard Webhooks key. */
struct paysig_keys {
    int n;
    struct paysig_key {
        char text[PAYSIG_SECRET_MAX + 1];
        unsigned char raw[PAYSIG_SECRET_MAX];
        size_t raw_len;
    } k[PAYSIG_KEYS_MAX];
};

/* Reads a TICKETD_PAY_SECRET: one secret, or two separated by a comma
 * (blanks around each are not part of it). Returns true with *out filled
 * (cleared on entry), or false with the reason in why (cap bytes) for a
 * setting that is empty, holds an empty secret, more than two, one longer
 * than PAYSIG_SECRET_MAX, or a whsec_ secret whose base64 does not
 * decode. */
bool paysig_keys_parse(const char *setting, struct paysig_keys *out, char *why, size_t cap);

/* paysig_verify with each of keys' secrets: OK or STALE as soon as one
 * made the signature, else BAD. */
enum paysig_result paysig_verify_keys(const struct paysig_keys *keys, const char *timestamp,
                                      const char *signature, const char *body, size_t len,
                                      int64_t now, int64_t tolerance_s);

/* Checks a Standard Webhooks delivery: id, timestamp and signatures are
 * the raw webhook-id, webhook-timestamp and webhook-signature values
 * (NULL when absent). The signature list is entries separated by blanks;
 * an entry of another version than v1 is skipped, and one v1 entry made
 * with one of keys' secrets over "<id>.<timestamp>.<body>" is enough.
 * Then the timestamp, as paysig_verify's. */
enum paysig_result paysig_verify_webhook(const struct paysig_keys *keys, const char *id,
                                         const char *timestamp, const char *signatures,
                                         const char *body, size_t len, int64_t now,
                                         int64_t tolerance_s);

/* Computes one Standard Webhooks signature, "v1,<base64>", into out
 * (PAYSIG_WEBHOOK_LEN + 1 bytes), with key (key_len bytes: a secret's
 * raw key). */
void paysig_sign_webhook(const unsigned char *key, size_t key_len, const char *id,
                         const char *timestamp, const char *body, size_t len,
                         char out[PAYSIG_WEBHOOK_LEN + 1]);

#endif
