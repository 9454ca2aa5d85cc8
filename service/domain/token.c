/* token.c - the one-time order token's steps in the domain (token.h):
 * the spend when the key's script did not spend it, the genuine token
 * Redis forgot, and what the order's transaction records. The atomic
 * spend itself is a script (SPEND_LUA, redis/cache_scripts.c). */
#include "token.h"

#include "app.h"
#include "cache.h"
#include "defences.h"
#include "err.h"
#include "inflight_key.h"
#include "metrics.h"
#include "order_answer.h"
#include "util.h"

/* What spending the token decided. */
enum token_verdict {
    TOKEN_GOES_ON,     /* spent by this key now or before, or nothing to check */
    TOKEN_INVALID,     /* unknown, someone else's, or spent by another key */
    TOKEN_UNAVAILABLE, /* Redis failed under policy strict */
};

const char *token_for_key(const struct app *app, const char *token)
{
    /* Stays a switch: the lesson is one token buying twice without it. */
    return (app->defences & DEFENCE_TOKEN) ? token : NULL;
}

static enum token_verdict spend(struct app *app, struct inflight_key *k)
{
    /* Tokens live only in Redis: without it (policy degrade; strict has
     * ended the request already) there is nothing to check, and the unique
     * index still holds the line. */
    if (k->token == NULL || !k->redis_ok)
        return TOKEN_GOES_ON;
    int rc = k->token_rc;
    if (rc == TOKEN_UNCHECKED) /* not in the key's script: on its own */
        rc = cache_token_take(k->user_id, k->token, k->name);
    if (rc == TD_OK)
        return TOKEN_GOES_ON;
    if (rc == TD_ENOTFOUND && ordertoken_check(app->cfg->jwt_secret, k->user_id, wall_s(),
                                               k->token) == ORDERTOKEN_GENUINE) {
        /* Issued by us to this user and not expired, yet unknown to Redis:
         * Redis lost it (flushed, restarted, a failover that lost the last
         * writes). It cannot say whether the token was spent, so, as
         * whenever Redis cannot vouch, the request goes on and the database
         * decides: a copy of this very request meets the unique index of
         * its key, another key the unique key of the token (unique_index.c). */
        metrics_inc(M_TOKEN_FORGOTTEN);
        return TOKEN_GOES_ON;
    }
    if (rc == TD_ENOTFOUND || rc == TD_ECONFLICT) {
        metrics_inc(M_DUP_TOKEN);
        return TOKEN_INVALID;
    }
    k->redis_ok = false;
    return app->cfg->redis_policy == REDIS_POLICY_STRICT ? TOKEN_UNAVAILABLE : TOKEN_GOES_ON;
}

bool token_passes(struct app *app, struct inflight_key *k, struct order_result *res)
{
    switch (spend(app, k)) {
    case TOKEN_GOES_ON:
        return true;
    case TOKEN_INVALID:
        orders_answer(res, ORDER_TOKEN_INVALID, LAYER_TOKEN);
        return false;
    case TOKEN_UNAVAILABLE:
        break;
    }
    orders_answer(res, ORDER_UNAVAILABLE, LAYER_NONE);
    return false;
}

const char *token_to_record(const struct app *app, const char *token, char *key)
{
    /* With the token switched off nothing was spent, so nothing is
     * recorded. (token-atomic off records nothing either: its naive spend
     * shows what Redis alone lets through, order_naive.h.) */
    if (token_for_key(app, token) == NULL)
        return NULL;
    ordertoken_key(token, key);
    return key;
}
