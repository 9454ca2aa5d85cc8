/*
 * paysign.h - the payment gateway's side of a callback's signature: the
 * lowercase hex HMAC-SHA256(secret, "<X-Pay-Timestamp>.<raw body>") that
 * ticketd checks (service/model/paysig.h), and the Standard Webhooks
 * signature it accepts as well.
 *
 * The one signer of every client that plays the gateway: ticketd-load,
 * the integration tests, and scripts/pay.sh (through ticketd-paysign).
 * Written apart from the service's own code, so that a mistake in the
 * service's check is not repeated here and passed by its own tests.
 * Thread-safe: no state besides the caller's buffers.
 */
#ifndef LOADTEST_PAYSIGN_H
#define LOADTEST_PAYSIGN_H

#include <stddef.h>

/* Lowercase hex of a SHA-256 HMAC plus the terminator. */
#define PAYSIGN_HEX_LEN 65

/*
 * Writes the X-Pay-Signature of a callback into hex (PAYSIGN_HEX_LEN
 * bytes): timestamp is the X-Pay-Timestamp value as sent (any text, so a
 * test can sign a malformed one), body the raw body of body_len bytes.
 * Returns 0, or -1 if the secret is empty or memory ran out.
 */
int paysign(const char *secret, const char *timestamp, const char *body, size_t body_len,
            char hex[PAYSIGN_HEX_LEN]);

/* "v1," and a SHA-256 HMAC in padded base64, plus the terminator. */
#define PAYSIGN_WEBHOOK_LEN 48

/*
 * Writes one Standard Webhooks signature of a delivery into sig
 * (PAYSIGN_WEBHOOK_LEN bytes): "v1,<base64 HMAC-SHA256(key,
 * "<id>.<timestamp>.<raw body>")>", where the key is the secret's bytes,
 * or, for a secret written whsec_<base64>, what the base64 decodes to.
 * id and timestamp are sent as given (any text). Returns 0, or -1 if the
 * secret is empty, its whsec_ base64 does not decode, or memory ran out.
 */
int paysign_webhook(const char *secret, const char *id, const char *timestamp, const char *body,
                    size_t body_len, char sig[PAYSIGN_WEBHOOK_LEN]);

#endif
