/* defences.h - which of ticketd's defences against duplicates are on.
 *
 * All are on by default. TICKETD_DEFENSES can switch single ones off so a
 * demo can show the damage each one prevents; that is refused unless
 * TICKETD_ENV=demo, and logged loudly when allowed. Pure. */
#ifndef TICKETD_DEFENSES_H
#define TICKETD_DEFENSES_H

#include <stdbool.h>
#include <stddef.h>

enum defence {
    DEFENCE_RESPONSE_CACHE = 1u << 0,
    DEFENCE_INFLIGHT_KEY = 1u << 1,
    DEFENCE_SESSION_LOCK = 1u << 2,
    DEFENCE_TOKEN = 1u << 3,
    DEFENCE_STOCK_CAS = 1u << 4,
    DEFENCE_UNIQUE_INDEX = 1u << 5,
    DEFENCE_CALLBACK_DEDUP = 1u << 6,
    DEFENCE_CONSUMER_DEDUP = 1u << 7,
    /* The details the articles warn about: each switched off runs the naive
     * code they describe, and nothing else changes. */
    DEFENCE_TOKEN_ATOMIC = 1u << 8,                 /* GET, then a separate write */
    DEFENCE_LOCK_OWNER_CHECK = 1u << 9,             /* the lock released by a plain DEL */
    DEFENCE_CONSUMER_DEDUP_SAME_TX = 1u << 10,      /* dedup row committed before the effect */
    DEFENCE_CONSUMER_DEDUP_BUSINESS_KEY = 1u << 11, /* dedup by stream entry id */
    DEFENCE_STATE_CAS = 1u << 12,                   /* read the status, write without predicate */
    DEFENCE_FORGET_FAILURES = 1u << 13,             /* failures remembered like successes */
    DEFENCE_ITEM_KEYS = 1u << 14,                   /* a cart's items under one batch key */
    DEFENCE_BUSINESS_KEY_AFTER_EXPIRY = 1u << 15,   /* no points ledger behind the dedup row */
    /* Not a guard against duplicates but a saving: the order-key filter in
     * front of the refusals' database look-up. Off, every refusal asks. */
    DEFENCE_BLOOM = 1u << 16,
    DEFENCE_BLOOM_LIVENESS = 1u << 17, /* a filter's "no" trusted even when it is not complete */
};

#define DEFENCES_ALL 0x3ffffu

/* Parses "all", "none", or a comma list of names (response-cache,
 * inflight-key, session-lock, token, stock-cas, unique-index,
 * callback-dedup, consumer-dedup, token-atomic, lock-owner-check,
 * consumer-dedup-same-tx, consumer-dedup-business-key, state-cas,
 * forget-failures, item-keys, business-key-after-expiry, bloom, bloom-liveness), each optionally
 * prefixed with '-' to switch it off. A list that starts with '-' starts from all on. Returns TD_OK
 * or TD_EINVAL with a reason in err. */
int defences_parse(const char *spec, unsigned *out, char *err, size_t cap);

/* Logs every switched-off defence, one line each: "DEFENCE SWITCHED OFF:
 * <name> -- <what gets through>". Returns TD_EINVAL (logged) if any is off
 * and env is not "demo". */
int defences_check_env(unsigned on, const char *env);

/* The name of one defence bit, e.g. "session-lock". */
const char *defence_name(enum defence d);

#endif
