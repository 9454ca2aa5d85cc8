/* paysig.h - the payment gateway's proof of origin: an HMAC-SHA256 over
 * "<X-Pay-Timestamp>.<raw body>" with TICKETD_PAY_SECRET, sent as lowercase
 * hex in X-Pay-Signature, and a timestamp within a tolerance of our clock.
 *
 * The signature is checked before the timestamp, as gateways' own
 * libraries do: a forged request learns nothing about our clock, and a
 * genuine but stale one (a replay of a captured callback) is told why.
 * The compare runs in constant time. Pure; thread-safe. */
#ifndef TICKETD_PAYSIG_H
#define TICKETD_PAYSIG_H

#include <stddef.h>
#include <stdint.h>

#define PAYSIG_HEX_LEN 64 /* SHA-256: 32 bytes, in hex */

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

#endif
