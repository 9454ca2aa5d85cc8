/* api_tokens.c - one-time order tokens: POST /api/v1/tokens. */
#include "api_internal.h"
#include "app.h"
#include "cache.h"
#include "err.h"
#include "ordertoken.h"
#include "util.h"

void api_tokens_create(struct req *r, struct resp *w)
{
    char token[ORDERTOKEN_MAX + 1];
    const struct config *cfg = r->app->cfg;
    if (!api_no_input(r, w))
        return;
    /* 192 random bits from the kernel CSPRNG, signed (ordertoken.h) so
     * that a token Redis forgot can still be told from a made-up one. */
    ordertoken_new(cfg->jwt_secret, r->who.user_id, wall_s() + cfg->token_ttl_s, token);
    /* Tokens live only in Redis; without it none can be issued (orders
     * still work in degrade mode, skipping the token check). */
    int rc = cache_token_put(r->who.user_id, token, cfg->token_ttl_s);
    if (rc != TD_OK) {
        api_fail(w, rc == TD_EINTERNAL ? TD_EUNAVAIL : rc, "issuing a token");
        return;
    }
    resp_json(w, 201, json_pack("{s:s,s:i}", "token", token, "expires_in", cfg->token_ttl_s));
}
