/* digest.c - SHA-256 and HMAC-SHA256 (digest.h), through OpenSSL 3 with
 * the algorithms fetched once and the HMAC contexts kept keyed per
 * thread. */
#include "digest.h"

#include "util.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t algs_once = PTHREAD_ONCE_INIT;
static EVP_MD *sha256_md;
static EVP_MAC *hmac_mac;

static void crypto_fail(const char *what)
{
    fprintf(stderr, "{\"level\":\"fatal\",\"msg\":\"OpenSSL: %s failed\"}\n", what);
    abort();
}

static void algs_fetch(void)
{
    sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
    hmac_mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (sha256_md == NULL || hmac_mac == NULL)
        crypto_fail("fetching SHA256 and HMAC"); /* the default provider has both */
}

void sha256(const void *data, size_t n, unsigned char out[SHA256_BYTES])
{
    unsigned int len = 0;
    pthread_once(&algs_once, algs_fetch);
    if (EVP_Digest(data, n, out, &len, sha256_md, NULL) != 1 || len != SHA256_BYTES)
        crypto_fail("SHA-256");
}

/* HMAC-SHA256 with a context keyed once per key. Keying an HMAC context
 * hashes the key's two pads, and naming the digest to EVP_MAC_init looks
 * it up again; a keyed context initialised again without a key starts
 * from the pads it kept, with no allocation. A service has a few keys:
 * the JWT secret, which also signs the order tokens, and the payment
 * secret in each scheme's form (two secrets while one is rotated), so each
 * thread keeps the contexts of the last HMAC_KEYS keys it used, freed when
 * the thread ends. A longer key than HMAC_KEY_MAX is keyed on each call. */
#define HMAC_KEYS    8
#define HMAC_KEY_MAX 256

struct hmac_keyed {
    EVP_MAC_CTX *ctx; /* NULL: an empty slot */
    size_t len;
    unsigned char key[HMAC_KEY_MAX];
};

struct hmac_cache {
    struct hmac_keyed slot[HMAC_KEYS];
    int next; /* the slot a new key takes (round robin) */
};

static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;
static pthread_key_t hmac_cache_key;

static void hmac_cache_free(void *arg)
{
    struct hmac_cache *hc = arg;
    for (int i = 0; i < HMAC_KEYS; i++)
        EVP_MAC_CTX_free(hc->slot[i].ctx);
    OPENSSL_cleanse(hc, sizeof *hc); /* the keys were secrets */
    free(hc);
}

static void hmac_key_create(void)
{
    if (pthread_key_create(&hmac_cache_key, hmac_cache_free) != 0)
        crypto_fail("creating the HMAC contexts' thread key");
}

/* A new context keyed with key, or NULL when it could not be made. */
static EVP_MAC_CTX *hmac_keyed_new(const void *key, size_t key_len)
{
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(hmac_mac);
    if (ctx != NULL && EVP_MAC_init(ctx, key, key_len, params) != 1) {
        EVP_MAC_CTX_free(ctx);
        ctx = NULL;
    }
    return ctx;
}

/* The calling thread's context for key, keyed and ready for data; *own is
 * set when the caller must free it (a key too long to keep). */
static EVP_MAC_CTX *hmac_ctx_for(const void *key, size_t key_len, bool *own)
{
    static const unsigned char empty[1];
    *own = false;
    if (key_len == 0)
        key = empty; /* a valid key of no bytes, not "no key" */
    if (key_len > HMAC_KEY_MAX) {
        *own = true;
        return hmac_keyed_new(key, key_len);
    }
    pthread_once(&hmac_once, hmac_key_create);
    struct hmac_cache *hc = pthread_getspecific(hmac_cache_key);
    if (hc == NULL) {
        hc = xcalloc(1, sizeof *hc);
        if (pthread_setspecific(hmac_cache_key, hc) != 0)
            crypto_fail("keeping the HMAC contexts");
    }
    for (int i = 0; i < HMAC_KEYS; i++) {
        struct hmac_keyed *k = &hc->slot[i];
        if (k->ctx != NULL && k->len == key_len && memcmp(k->key, key, key_len) == 0)
            return EVP_MAC_init(k->ctx, NULL, 0, NULL) == 1 ? k->ctx : NULL;
    }
    EVP_MAC_CTX *ctx = hmac_keyed_new(key, key_len);
    if (ctx == NULL)
        return NULL;
    struct hmac_keyed *k = &hc->slot[hc->next];
    hc->next = (hc->next + 1) % HMAC_KEYS;
    EVP_MAC_CTX_free(k->ctx);
    k->ctx = ctx;
    k->len = key_len;
    memcpy(k->key, key, key_len);
    return ctx;
}

void hmac_sha256(const void *key, size_t key_len, const void *data, size_t n,
                 unsigned char out[SHA256_BYTES])
{
    size_t len = 0;
    bool own;
    pthread_once(&algs_once, algs_fetch);
    EVP_MAC_CTX *ctx = hmac_ctx_for(key, key_len, &own);
    if (ctx == NULL || EVP_MAC_update(ctx, data, n) != 1 ||
        EVP_MAC_final(ctx, out, &len, SHA256_BYTES) != 1 || len != SHA256_BYTES)
        crypto_fail("HMAC-SHA256");
    if (own)
        EVP_MAC_CTX_free(ctx);
}
