/* api_tokens.c - one-time order tokens: POST /api/v1/tokens. */
#include "api_internal.h"
#include "app.h"
#include "cache.h"
#include "err.h"
#include "util.h"

/* 32 bytes from the kernel CSPRNG: 256 bits, far past guessing. */
#define TOKEN_BYTES 32

void api_tokens_create(struct req *r, struct resp *w)
{
    unsigned char raw[TOKEN_BYTES];
    char token[64];
    const struct config *cfg = r->app->cfg;
    if (!api_no_input(r, w))
        return;
    rand_bytes(raw, sizeof raw);
    b64url_encode(raw, sizeof raw, token);
    /* Tokens live only in Redis; without it none can be issued (orders
     * still work in degrade mode, skipping the token check). */
    int rc = cache_token_put(r->who.user_id, token, cfg->token_ttl_s);
    if (rc != TD_OK) {
        api_fail(w, rc == TD_EINTERNAL ? TD_EUNAVAIL : rc, "issuing a token");
        return;
    }
    resp_json(w, 201, json_pack("{s:s,s:i}", "token", token, "expires_in", cfg->token_ttl_s));
}
