/* breaker.c - a dependency's circuit breaker (breaker.h), one per
 * dependency and shared by every thread. Apart so that Redis and MySQL
 * fail fast by the same rule. */
#include "breaker.h"

#include "log.h"

enum breaker_pass breaker_ask(struct breaker *b, int64_t now_ms)
{
    int64_t until = atomic_load_explicit(&b->open_until_ms, memory_order_acquire);
    if (until == 0)
        return BREAKER_CALL;
    if (now_ms < until)
        return BREAKER_REFUSED;
    /* The cooldown is over: one caller probes, the others keep failing fast
     * until it reports, so a still-paused server costs one timeout per
     * cooldown, not one per request. */
    bool expected = false;
    if (atomic_compare_exchange_strong(&b->probing, &expected, true))
        return BREAKER_PROBE;
    return BREAKER_REFUSED;
}

void breaker_success(struct breaker *b, enum breaker_pass pass)
{
    if (pass != BREAKER_PROBE)
        return;
    atomic_store_explicit(&b->open_until_ms, 0, memory_order_release);
    atomic_store(&b->probing, false);
    log_info("%s: answering again; every thread uses it from now on", b->name);
}

bool breaker_failure(struct breaker *b, enum breaker_pass pass, int64_t now_ms)
{
    int64_t until = now_ms + b->cooldown_ms;
    int64_t old = atomic_exchange_explicit(&b->open_until_ms, until, memory_order_acq_rel);
    if (pass == BREAKER_PROBE)
        atomic_store(&b->probing, false);
    if (old != 0)
        return false;
    atomic_fetch_add(&b->opened, 1);
    log_warn("%s: unavailable; failing fast for %d ms before one probe", b->name, b->cooldown_ms);
    return true;
}

bool breaker_is_open(struct breaker *b, int64_t now_ms)
{
    int64_t until = atomic_load_explicit(&b->open_until_ms, memory_order_acquire);
    return until != 0 && now_ms < until;
}
