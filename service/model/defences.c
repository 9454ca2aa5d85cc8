#include "defences.h"

#include "err.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

static const struct {
    enum defence bit;
    const char *name;
    const char *harm; /* what gets through with it off */
} names[] = {
    {DEFENCE_RESPONSE_CACHE, "response-cache", "duplicates it would stop will get through"},
    {DEFENCE_INFLIGHT_KEY, "inflight-key", "duplicates it would stop will get through"},
    {DEFENCE_SESSION_LOCK, "session-lock", "duplicates it would stop will get through"},
    {DEFENCE_TOKEN, "token", "duplicates it would stop will get through"},
    {DEFENCE_STOCK_CAS, "stock-cas", "duplicates it would stop will get through"},
    {DEFENCE_UNIQUE_INDEX, "unique-index", "duplicates it would stop will get through"},
    {DEFENCE_CALLBACK_DEDUP, "callback-dedup", "duplicates it would stop will get through"},
    {DEFENCE_CONSUMER_DEDUP, "consumer-dedup", "duplicates it would stop will get through"},
    {DEFENCE_TOKEN_ATOMIC, "token-atomic",
     "order tokens are checked with GET and spent by a separate write: two requests with one "
     "token can both pass"},
    {DEFENCE_LOCK_OWNER_CHECK, "lock-owner-check",
     "session locks are released by a plain DEL: a request slower than the lock TTL frees "
     "another request's lock"},
    {DEFENCE_CONSUMER_DEDUP_SAME_TX, "consumer-dedup-same-tx",
     "consumers commit their dedup row before the effect: an effect that fails is skipped on "
     "redelivery"},
    {DEFENCE_CONSUMER_DEDUP_BUSINESS_KEY, "consumer-dedup-business-key",
     "consumers dedup by stream entry id: a re-published event is applied again"},
    {DEFENCE_STATE_CAS, "state-cas",
     "order transitions read the status and write without a status/version predicate: "
     "concurrent transitions both apply"},
    {DEFENCE_FORGET_FAILURES, "forget-failures",
     "failures are remembered under their Idempotency-Key: a retry after the cause is gone is "
     "refused forever"},
    {DEFENCE_ITEM_KEYS, "item-keys",
     "a cart's items are ordered under the batch key alone: a retry of a partly failed cart "
     "buys its items that succeeded again"},
    {DEFENCE_BUSINESS_KEY_AFTER_EXPIRY, "business-key-after-expiry",
     "the points consumer has no ledger behind its dedup rows: an event redelivered after its "
     "row's partition was dropped, or on another day, is credited again"},
    {DEFENCE_BLOOM, "bloom",
     "no order-key filter: every refusal Redis decides costs a database look-up (nothing gets "
     "through; it is slower)"},
    {DEFENCE_BLOOM_LIVENESS, "bloom-liveness",
     "the order-key filter's 'no' is trusted after Redis lost its records: a retry whose order "
     "exists is refused"},
};

#define N_NAMES (sizeof names / sizeof names[0])

const char *defence_name(enum defence d)
{
    for (size_t i = 0; i < N_NAMES; i++) {
        if (names[i].bit == d)
            return names[i].name;
    }
    return "unknown";
}

int defences_parse(const char *spec, unsigned *out, char *err, size_t cap)
{
    if (spec[0] == '\0') {
        /* An empty value is a mistake, not a wish to switch everything off. */
        snprintf(err, cap, "empty; use \"all\", \"none\" or a list");
        return TD_EINVAL;
    }
    unsigned on = spec[0] == '-' ? DEFENCES_ALL : 0;
    const char *p = spec;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        char item[32];
        if (n == 0 || n >= sizeof item) {
            snprintf(err, cap, "empty or overlong item");
            return TD_EINVAL;
        }
        memcpy(item, p, n);
        item[n] = '\0';
        p += n;
        if (*p == ',')
            p++;
        bool off = item[0] == '-';
        const char *name = off ? item + 1 : item;
        if (strcmp(name, "all") == 0) {
            on = off ? 0 : DEFENCES_ALL;
            continue;
        }
        if (strcmp(name, "none") == 0 && !off) {
            on = 0;
            continue;
        }
        unsigned bit = 0;
        for (size_t i = 0; i < N_NAMES; i++) {
            if (strcmp(names[i].name, name) == 0)
                bit = names[i].bit;
        }
        if (bit == 0) {
            snprintf(err, cap, "unknown defence '%s'", name);
            return TD_EINVAL;
        }
        on = off ? on & ~bit : on | bit;
    }
    *out = on;
    return TD_OK;
}

int defences_check_env(unsigned on, const char *env)
{
    bool any_off = false;
    for (size_t i = 0; i < N_NAMES; i++) {
        if ((on & names[i].bit) == 0) {
            any_off = true;
            log_warn("DEFENCE SWITCHED OFF: %s -- %s", names[i].name, names[i].harm);
        }
    }
    if (any_off && strcmp(env, "demo") != 0) {
        log_error("defences may only be switched off with TICKETD_ENV=demo (it is %s)", env);
        return TD_EINVAL;
    }
    return TD_OK;
}
