/* digest.h - SHA-256 and HMAC-SHA256: the order key's fingerprint, the
 * order token's and the JWT's signatures, the payment callbacks'
 * signatures. */
#ifndef TICKETD_DIGEST_H
#define TICKETD_DIGEST_H

#include <stddef.h>

/* SHA-256 and HMAC-SHA256 into out (32 bytes). OpenSSL 3's one-shot
 * SHA256() and HMAC() look the algorithm up by name on every call, which
 * costs more than hashing a request's few hundred bytes; these look it up
 * once, and hmac_sha256 keys a context once per key and thread (the last
 * few keys each thread used). Thread-safe. They abort if OpenSSL fails,
 * which it does only without memory. */
#define SHA256_BYTES 32
void sha256(const void *data, size_t n, unsigned char out[SHA256_BYTES]);
void hmac_sha256(const void *key, size_t key_len, const void *data, size_t n,
                 unsigned char out[SHA256_BYTES]);

#endif
