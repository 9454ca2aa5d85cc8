"""The one table of the replay lab's lessons and fault runs.

The live page (ticketd-lab serve), `make lesson L=<name>` and the recorded
run the docs quote (ticketd-lab record) all read this table and nothing
else: a name the page sends is looked up here, and only the argv lists
below (with the lab's own ports filled in) are ever executed.

Each lesson runs twice on the lab's private stack: once without its
defence, once with it. A pass names the defences it switches off
(TICKETD_DEFENSES), the database (the main one, or the one without the
unique keys on orders), the binary (release, or the faults build for
TICKETD_FAULT), extra settings, and the ticketd-load arguments. `n(x)`
scales a count by the lab's size setting, so that the tests can run the
same lessons smaller.

Words in the load arguments that start with '@' are filled in by the
runner: @redeliver (--after-load with loadtest/redeliver.sh), @late-redeliver
(the same after `ticketd partitions` ran twelve days ahead, so that the
consumers' dedup rows are dropped first), @flush, @kill2 and @mysql-restart
(--fault with the lab's own Redis, second instance or MariaDB), and
@midway-flush (refusal-storm's --midway, the lab's Redis flushed between
its orders and its refusals). A pass's "sql" runs on its database after it
is emptied, before the instances start.

The defences a pass may switch off, and which lesson shows each, are the
service's own table (service/model/defences.def, read by defences.py): a
pass that names another, or a row whose lesson is not here, stops the lab
at import.
"""

import defences

# The damage kinds of ticketd-load's JSON report ("damage": {...}), with
# the unit each is counted in, in the order the page shows them.
DAMAGE = [
    ("duplicate_orders", "duplicate orders"),
    ("token_reused_orders", "orders beyond one per token"),
    ("oversold_seats", "oversold seats"),
    ("refunded_applied_payments", "applied payments also refunded"),
    ("double_applied_payments", "payments applied twice"),
    ("paid_cancelled_orders", "orders both paid and cancelled"),
    ("double_credited_points", "points credited twice"),
    ("missing_points", "points lost"),
    ("lock_bypassed_orders", "orders past a held session lock"),
    ("failures_replayed", "retries refused forever"),
    ("forbidden_answers", "answers the contract forbids"),
    ("wrong_refusals", "keys with an order refused"),
    ("audit_failed_checks", "failed audit checks"),
]

# Which of the checker's violations (lab/checker.py) name the requests
# behind each damage kind: a lesson's witnesses of its own kind come first.
WITNESS_KINDS = {
    "duplicate_orders": ["duplicate-order", "told-new-twice"],
    "token_reused_orders": ["token-reused", "duplicate-order"],
    "oversold_seats": ["oversold"],
    "refunded_applied_payments": ["applied-and-refunded"],
    "double_applied_payments": ["double-applied"],
    "paid_cancelled_orders": ["paid-and-cancelled"],
    "failures_replayed": ["failure-replayed"],
    "forbidden_answers": ["refused-with-order", "told-new-twice"],
    "wrong_refusals": ["refused-with-order"],
    "double_credited_points": ["points-wrong"],
    "missing_points": ["points-wrong"],
}

MAIN_DB = "main"
NOINDEX_DB = "noindex"
REDIS_LAYERS = "response-cache,inflight-key,session-lock,token"


def _storm(n, rounds=300, copies=8):
    return ["retry-storm", "--rounds", str(n(rounds)), "--copies", str(copies), "--stock", "1000000"]


def _click(n, rounds=150):
    return ["double-click", "--shared-token", "--rounds", str(n(rounds)), "--stock", "1000000"]


def _sale(n):
    return ["flash-sale", "--users", str(n(500)), "--seats", "50", "--rounds", "2"]


def _cart(n, rounds=40):
    return ["cart-storm", "--rounds", str(n(rounds)), "--copies", "4"]


def _gateway(n, orders=150):
    return ["gateway-retry", "--orders", str(n(orders)), "--retries", "3"]


def _mq(n, orders=60, settle=20):
    # Points lost never come: a pass that loses them waits its whole
    # settle time for them, with nothing else to show.
    return ["mq-redelivery", "--orders", str(n(orders)), "--settle", str(settle)]


def _refusals(n, rounds=200):
    return ["refusal-storm", "--rounds", str(n(rounds))]


def _pass(off="", db=MAIN_DB, faults=False, env=(), load=None, sql=(), stall=False):
    defences.names_of(off)
    return {"off": off, "db": db, "faults": faults, "env": list(env), "load": load,
            "sql": list(sql), "stall": stall}


# The consumers' dedup rows start in one partition for everything, as a
# fresh database has them: the instances then split today's off, and the
# late `ticketd partitions` drops it (a day split off by an earlier run's
# moved clock would hold today's rows past that run's reach).
FRESH_CONSUME_PARTITIONS = [
    "ALTER TABLE consume_records PARTITION BY RANGE (TO_DAYS(created_day)) "
    "(PARTITION p_future VALUES LESS THAN MAXVALUE)"]


# The fault runs fire their fault a third of the way through the storm's
# answers (600 keys x 8 copies), so that it lands mid-load on a machine of
# any speed: the moment is counted in answers, not in ms.
def _fstorm(n):
    return _storm(n, rounds=600) + ["--fault-after", str(n(1600))]


# The runs whose copies must pass Redis while the key's first copy is still
# in the database: the pass holds the orders table with a long transaction
# (runner.Stall) from its start, so every order's INSERT waits after its
# look-up, until the load's --fault or --fault-end command releases it after
# a number of answers. The clients send no order token: the token's row in
# the database is a unique key too and would catch the copy (the token
# lessons show that layer). Each held order keeps a fiber and a database
# connection, hence the larger pool.
STALL_ENV = ["TICKETD_ORDER_TOKEN_REQUIRED=0", "TICKETD_DB_CONNS=96"]
# An instance frozen longer than this is taken for dead (its heartbeat).
FREEZE_ENV = ["TICKETD_INSTANCE_TTL_MS=300"]
# Markers and locks that expire while the request they stand for still runs.
SHORT_TTL_ENV = ["TICKETD_INFLIGHT_TTL_MS=300", "TICKETD_LOCK_TTL_MS=300"]


def _stalled_storm(n, rounds=40, copies=6, spread=1500):
    """Every key at once, its copies leaving every spread/(copies-1) ms: a
    client that sends its request again on its own timer."""
    return ["retry-storm", "--rounds", str(n(rounds)), "--copies", str(copies), "--spread",
            str(spread), "--concurrency", str(n(rounds) * copies), "--stock", "1000000",
            "--no-token"]


def _flush_then_release(n, rounds=40):
    # The copies leave in waves (every 300 ms); a wave's 409s come back at
    # once, but a key whose first copy waits longest answers its copies late
    # (about one a wave). So the flush comes during the third wave's answers
    # (two waves, less a margin for those late keys), the next wave finds no
    # markers and goes on to the database, and the answers of the wave after
    # it, which meets that wave's markers, end the stall (again less a
    # margin). Counted whole, both landed a wave late in some runs: the
    # flush raced the wave meant to find no markers, or the stall outlived
    # the copies' own 5 s client timeout, which rolled them back.
    margin = max(2, n(rounds) // 4)
    return ["--fault-after", str(2 * n(rounds) - margin), "@flush", "--fault-end-after",
            str(n(rounds) - max(1, n(rounds) // 10)), "@end-release"]


def _freeze_storm(n, rounds=60):
    # Copies every 300 ms, each to the next instance. Halfway through the
    # first wave's answers the second instance freezes; once its heartbeat
    # expired (300 ms) the first takes over its markers; after as many
    # answers as keys (only the first instance answers: two waves at least)
    # the stall ends and the frozen one wakes.
    return _stalled_storm(n, rounds=rounds, copies=8, spread=2100) + [
        "--fault-after", str(max(1, n(rounds) // 2)), "@stop2", "--fault-end-after",
        str(n(rounds)), "@end-release-cont2"]


# Records that expire a second after they were written.
LATE_ENV = ["TICKETD_INFLIGHT_TTL_MS=1000", "TICKETD_LOCK_TTL_MS=1000", "TICKETD_IDEM_TTL_S=1"]


def _late_storm(n, rounds=40):
    # Copies every 600 ms: the one at 0.6 s meets the marker, the one at
    # 1.2 s comes after it expired, the one at 1.8 s meets the retry's; the
    # stall ends once half of those answered.
    return _stalled_storm(n, rounds=rounds, copies=5, spread=2400) + [
        "--fault-after", str(n(rounds) * 3 // 2), "@release"]


def _slow_storm(n, rounds=30):
    # Ten copies a key, 100 ms apart: the 300 ms markers expire twice or
    # three times while the first copy waits; the stall ends after four
    # waves' worth of answers.
    return _stalled_storm(n, rounds=rounds, copies=10, spread=900) + [
        "--fault-after", str(4 * n(rounds)), "@release"]


# Orders both paid and cancelled never get the points the verdict waits
# for: without state-cas the verdict would wait its whole settle time (20 s)
# with nothing to show. Points and tickets of a sound run settle within a
# second here.
STATE_CAS_SETTLE = ["--settle", "5"]


LESSONS = [
    {
        "name": "four-layers",
        "kind": "lesson",
        "title": "The four layers",
        "articles": "000 §2, 002 §6.3, 004 §6.3",
        "idea": "Duplicates are stopped at the entry (key, token), in the business (lock), "
        "in the data (unique index) and in the consumers (dedup rows). Each cheaper layer "
        "in front only saves work; the data layer is the one that must hold.",
        "defence": "the four layers",
        "where": "service/domain/orders.c:orders_create, service/domain/consume.c:consume_apply",
        "unit": "duplicate orders",
        "figure": ["duplicate_orders"],
        "without": lambda n: _pass(REDIS_LAYERS + ",unique-index", NOINDEX_DB, load=_storm(n)),
        "with": lambda n: _pass(load=_storm(n)),
    },
    {
        "name": "token-atomic",
        "kind": "lesson",
        "title": "Token atomicity",
        "articles": "000 §3, 002 §3.2, §4.3",
        "idea": "Checking a one-time token and spending it must be one step. A GET and a "
        "later write leave a window in which two requests both see it unspent.",
        "defence": "token-atomic",
        "where": "service/redis/cache_scripts.c:SPEND_LUA (inside begin_lua, or cache_token_take); "
        "the naive one service/redis/cache_naive.c:cache_naive_token_take",
        "unit": "orders beyond one per token",
        "figure": ["token_reused_orders"],
        "without": lambda n: _pass("session-lock,token-atomic", load=_click(n)),
        "with": lambda n: _pass("session-lock", load=_click(n)),
    },
    {
        "name": "lock-owner-check",
        "kind": "lesson",
        "title": "Lock vs idempotency",
        "articles": "000 §4.3, 004 §5.5",
        "idea": "A lock keeps two copies from running at once; it does not remember "
        "results, and it must be released by its owner only. A plain DEL frees a lock "
        "that expired and was taken by someone else.",
        "defence": "lock-owner-check",
        "where": "service/redis/cache_scripts.c:complete_lua, release_lua (compare-and-delete)",
        "unit": "orders past a held session lock",
        "figure": ["lock_bypassed_orders"],
        "without": lambda n: _pass(
            "lock-owner-check", faults=True,
            env=["TICKETD_LOCK_TTL_MS=400", "TICKETD_FAULT=order.after_redis:delay:600"],
            load=["double-click", "--burst", "3", "--gaps", "450,250", "--lock-ttl", "400",
                  "--rounds", str(n(6))]),
        "with": lambda n: _pass(
            faults=True,
            env=["TICKETD_LOCK_TTL_MS=400", "TICKETD_FAULT=order.after_redis:delay:600"],
            load=["double-click", "--burst", "3", "--gaps", "450,250", "--lock-ttl", "400",
                  "--rounds", str(n(6))]),
    },
    {
        "name": "stable-key",
        "kind": "lesson",
        "title": "Stable request id across retries",
        "articles": "000 §5.4, 004 §3.2",
        "idea": "The client makes the id once per intent and sends it again on every retry. "
        "A new id per attempt defeats every layer.",
        "defence": "one Idempotency-Key per intent",
        "where": "service/api/api_orders.c:api_orders_create (Idempotency-Key)",
        "unit": "orders beyond one per purchase",
        # Both passes have the session lock and the token off; only the key
        # the client sends differs (a new one per click, or one per intent).
        "figure": ["token_reused_orders", "duplicate_orders"],
        "without": lambda n: _pass("session-lock,token", load=_click(n)),
        "with": lambda n: _pass("session-lock,token", load=_storm(n, rounds=150, copies=2)),
    },
    {
        "name": "insert-first",
        "kind": "lesson",
        "title": "Insert first, read back",
        "articles": "000 §5.3, 002 §2.1",
        "idea": "Insert and let the unique key refuse the copy (1062), then read the existing "
        "row and answer with it. Looking first and inserting after races.",
        "defence": "unique-index",
        "where": "sql/013_place_orders.sql (place_orders: each order's INSERT under its unique "
        "key), service/mysql/store_mysql.c:place_in_one_trip (ORDER_INSERT), "
        "service/domain/unique_index.c:unique_index_find_copy",
        "unit": "duplicate orders",
        "figure": ["duplicate_orders"],
        "without": lambda n: _pass(REDIS_LAYERS + ",unique-index", NOINDEX_DB, load=_storm(n)),
        "with": lambda n: _pass(REDIS_LAYERS, load=_storm(n)),
    },
    {
        "name": "stock-cas",
        "kind": "lesson",
        "title": "CAS vs read-modify-write",
        "articles": "002 §5, 004 §3.3",
        "idea": "Stock changes only by UPDATE ... WHERE <what I read is still true>; 0 rows "
        "means someone else won. Reading, deciding in the process and writing blindly lets "
        "both writers win.",
        "defence": "stock-cas",
        "where": "sql/013_place_orders.sql (place_orders: UPDATE ... stock = stock - q under "
        "CHECK, per order), service/mysql/store_mysql.c:place_in_one_trip (ORDER_STOCK), "
        "service/naive/store_naive.c:store_naive_place_read_stock",
        "unit": "oversold seats",
        "figure": ["oversold_seats"],
        "without": lambda n: _pass("stock-cas", load=_sale(n)),
        "with": lambda n: _pass(load=_sale(n)),
    },
    {
        "name": "state-cas",
        "kind": "lesson",
        "title": "Version and state machine",
        "articles": "002 §5, 004 §3.4",
        "idea": "Every transition is allowed by one table and written with status = ? AND "
        "version = ?, on a row locked first. Without it, a cancel and a payment that race "
        "both apply.",
        "defence": "state-cas",
        "where": "service/model/statemachine.c:statemachine_next, store_tx_transition, "
        "service/naive/store_naive.c:store_naive_move_blind",
        "unit": "orders both paid and cancelled",
        "figure": ["paid_cancelled_orders"],
        "without": lambda n: _pass("state-cas", faults=True,
                                   env=["TICKETD_FAULT=order.before_transition:delay:50"],
                                   load=_gateway(n) + STATE_CAS_SETTLE),
        "with": lambda n: _pass(faults=True,
                                env=["TICKETD_FAULT=order.before_transition:delay:50"],
                                load=_gateway(n) + STATE_CAS_SETTLE),
    },
    {
        "name": "callback-dedup",
        "kind": "lesson",
        "title": "The triple-credited callback",
        "articles": "004 §2",
        "idea": "A gateway retries its callback, and each copy must get the first outcome, "
        "not a second payment. The txn_id is unique and recorded in the payment's "
        "transaction.",
        "defence": "callback-dedup",
        "where": "service/domain/payments.c:payments_callback, "
        "service/mysql/payments_mysql.c:store_payment_insert",
        "unit": "applied payments also refunded",
        "figure": ["refunded_applied_payments"],
        "without": lambda n: _pass("callback-dedup", load=_gateway(n)),
        "with": lambda n: _pass(load=_gateway(n)),
    },
    {
        "name": "consumer-dedup-same-tx",
        "kind": "lesson",
        "title": "Dedup in the same transaction",
        "articles": "000 §6.2, 004 §3.5",
        "idea": "The consumer's dedup row and its effect commit together or not at all. "
        "Committed first on its own, a failed effect leaves the row and the redelivery "
        "skips it: the effect is lost.",
        "defence": "consumer-dedup-same-tx",
        "where": "service/mysql/events_mysql.c:store_events_consume",
        "unit": "points lost",
        "figure": ["missing_points"],
        "without": lambda n: _pass(
            "consumer-dedup-same-tx", faults=True,
            env=["TICKETD_CLAIM_IDLE_MS=300", "TICKETD_FAULT=consumer.effect:fail:10"],
            load=_mq(n, settle=5)),
        "with": lambda n: _pass(
            faults=True,
            env=["TICKETD_CLAIM_IDLE_MS=300", "TICKETD_FAULT=consumer.effect:fail:10"],
            load=_mq(n, settle=5)),
    },
    {
        "name": "consumer-dedup-business-key",
        "kind": "lesson",
        "title": "Message id vs business key",
        "articles": "004 §5.3",
        "idea": "Deduplicate by what the effect is about (points for order N), not by the "
        "message's id. A republished event arrives under a new id.",
        "defence": "consumer-dedup-business-key",
        "where": "service/domain/consume.c:consume_dedup_key, "
        "service/jobs/consumers.c:consumers_key_by_business",
        "unit": "points credited twice",
        "figure": ["double_credited_points"],
        "without": lambda n: _pass("consumer-dedup-business-key",
                                   load=_mq(n) + ["@redeliver"]),
        "with": lambda n: _pass(load=_mq(n) + ["@redeliver"]),
    },
    {
        "name": "late-replay",
        "kind": "lesson",
        "title": "Expiry and late replays",
        "articles": "004 §5.2",
        "idea": "Records in Redis expire, and a retry after that is not a new request. Here "
        "the in-flight marker lives 1 s while the first attempt is still in the database (a "
        "long transaction holds the orders table): the retry that comes 1.2 s later finds no "
        "record, looks for the order, finds none yet, and inserts a second one. The unique "
        "index makes it wait for the first attempt and answers it with that order.",
        "defence": "unique-index",
        "where": "service/domain/unique_index.c:unique_index_place, unique_index_find_copy",
        "unit": "duplicate orders",
        "figure": ["duplicate_orders"],
        "without": lambda n: _pass("unique-index", NOINDEX_DB, env=STALL_ENV + LATE_ENV,
                                   stall=True, load=_late_storm(n)),
        "with": lambda n: _pass(env=STALL_ENV + LATE_ENV, stall=True, load=_late_storm(n)),
    },
    {
        "name": "forget-failures",
        "kind": "lesson",
        "title": "Only successes are remembered",
        "articles": "004 §5.4, 000 §3.3",
        "idea": "A failure must leave the key free, so that the retry after the dependency "
        "is back succeeds. A stored 503 is replayed forever.",
        "defence": "forget-failures",
        "where": "service/domain/orders.c:orders_create (remember, end_failure), service/naive/order_naive.c:order_naive_remember_failure",
        "unit": "retries refused forever",
        "figure": ["failures_replayed"],
        "without": lambda n: _pass("forget-failures", faults=True,
                                   env=["TICKETD_FAULT=order.commit_lost:fail:5"],
                                   load=_storm(n, rounds=40, copies=4)
                                   + ["--client-retries", "2"]),
        "with": lambda n: _pass(faults=True, env=["TICKETD_FAULT=order.commit_lost:fail:5"],
                                load=_storm(n, rounds=40, copies=4) + ["--client-retries", "2"]),
    },
    {
        "name": "status-codes",
        "kind": "lesson",
        "title": "Which status code for a duplicate",
        "articles": "004 §5.1, §5.4",
        "idea": "A completed duplicate gets the original answer (201, replayed), a copy still "
        "in flight 409 REQUEST_IN_PROGRESS. A client told it failed for an order that exists "
        "buys again.",
        "defence": "inflight-key",
        "where": "service/api/api_orders.c:api_orders_create, service/domain/inflight_key.c:answer_from_record",
        "unit": "answers the contract forbids",
        "figure": ["forbidden_answers"],
        "without": lambda n: _pass("response-cache,inflight-key", load=_storm(n, rounds=100)),
        "with": lambda n: _pass("response-cache", load=_storm(n, rounds=100)),
    },
    {
        "name": "replay-test",
        "kind": "lesson",
        "title": "Concurrent replay as the minimum test",
        "articles": "004 §4.4, 002 §2.3",
        "idea": "A replay test must send its copies AT ONCE to find anything. Both passes "
        "test the same broken code (check-then-insert, no unique key). Sent one after "
        "another (each key once, then again once answered), the copies find 0 duplicate "
        "orders and the broken code passes the test: that is the damage. Sent at once, 8 "
        "copies a key, they find the duplicates, and the test fails it: 0 broken code "
        "passed.",
        "defence": "copies sent at once",
        "where": "loadtest/ticketd-load/ (retry-storm), tests/integration/itest_replaylab.c",
        "unit": "broken order paths passed by the test",
        "figure": ["duplicate_orders"],
        # The figure is whether the test missed the bug (1) or found it (0);
        # what it found is shown beside it.
        "judge": "missed",
        # One after another: each key's one copy, then (retry-storm's retry
        # after the storm) the same request again once every key was
        # answered. Copies on a timer instead (--spread) overlap whenever
        # an order is slower than the timer, and find a duplicate now and
        # then: that test is not sequential, only unreliable.
        "without": lambda n: _pass(REDIS_LAYERS + ",unique-index", NOINDEX_DB,
                                   load=_storm(n, rounds=50, copies=1)),
        "with": lambda n: _pass(REDIS_LAYERS + ",unique-index", NOINDEX_DB,
                                load=_storm(n, rounds=50)),
    },
    {
        "name": "item-keys",
        "kind": "lesson",
        "title": "A key per item, a key for the batch",
        "articles": "004 §6.2",
        "idea": "A cart must not share one idempotency key: when some items succeed and "
        "some fail, one key cannot record the state in between. Each item is an order "
        "under its own key; the batch key guards the batch.",
        "defence": "item-keys",
        "where": "service/domain/cart.c:cart_run (each item through orders_create)",
        "unit": "cart items bought twice",
        "figure": ["cart_items_bought_twice"],
        "without": lambda n: _pass("item-keys", load=_cart(n)),
        "with": lambda n: _pass(load=_cart(n)),
    },
    {
        "name": "business-key-after-expiry",
        "kind": "lesson",
        "title": "Records kept for their window, dropped by partition",
        "articles": "004 §4.3 step 5, §5.2, §6.2",
        "idea": "The rows that only deduplicate are kept for their window and dropped a day "
        "at a time by DROP PARTITION. Beyond the window a replay must not become a new "
        "request: the business table dedupes again by its own key (the points ledger, by "
        "order). Here every event is redelivered after its consumers' dedup rows were "
        "dropped.",
        "defence": "business-key-after-expiry",
        "where": "service/mysql/events_mysql.c:points_effect (points_ledger), service/jobs/retention_job.c",
        "unit": "points credited twice",
        "figure": ["double_credited_points"],
        "without": lambda n: _pass("business-key-after-expiry", sql=FRESH_CONSUME_PARTITIONS,
                                   load=_mq(n) + ["@late-redeliver"]),
        "with": lambda n: _pass(sql=FRESH_CONSUME_PARTITIONS, load=_mq(n) + ["@late-redeliver"]),
    },
    {
        "name": "bloom",
        "kind": "lesson",
        "title": "A Bloom filter in front of the database",
        "articles": "004 §6.2",
        "idea": "Before a refusal Redis decided, ticketd asks the database whether the key "
        "already has its order. A filter of the keys that have orders answers \"certainly "
        "not\" for most of those questions, without the query; a false positive costs the "
        "query, never a wrong answer. The figure is a cost, not damage: look-ups for keys "
        "that have no order.",
        "defence": "bloom",
        "where": "service/domain/order_key_filter.c:order_key_filter_may_have, order_key_filter_note; service/jobs/bloom_job.c",
        "unit": "database look-ups for refusals",
        "figure": ["refusal_storm.refusal_db_lookups"],
        "without": lambda n: _pass("bloom", load=_refusals(n)),
        "with": lambda n: _pass(load=_refusals(n)),
    },
    {
        "name": "bloom-liveness",
        "kind": "lesson",
        "title": "A filter's \"no\" after Redis forgot",
        "articles": "004 §6.2",
        "idea": "A filter only says \"no\" truthfully while it has seen every key. Redis "
        "flushed, the filter is empty: believed, it refuses retries whose orders exist. "
        "ticketd trusts it only once rebuilt from the orders table (here never: the "
        "rebuild is put off), and asks the database meanwhile.",
        "defence": "bloom-liveness",
        "where": "service/domain/order_key_filter.c:order_key_filter_may_have, service/redis/cache_scripts.c:bloom_check_lua",
        "unit": "keys with an order refused",
        "figure": ["wrong_refusals"],
        # No rebuild after the flush, and no in-process answers: every retry
        # meets the flushed filter.
        "without": lambda n: _pass("bloom-liveness",
                                   env=["TICKETD_BLOOM_CHECK_MS=3600000",
                                        "TICKETD_RESPCACHE_ENTRIES=0"],
                                   load=_refusals(n) + ["@midway-flush"]),
        "with": lambda n: _pass(env=["TICKETD_BLOOM_CHECK_MS=3600000",
                                     "TICKETD_RESPCACHE_ENTRIES=0"],
                                load=_refusals(n) + ["@midway-flush"]),
    },
    {
        # Prefer: wait (RFC 7240): the same storm, once as clients that are told
        # 409 and must poll, once as clients that ask to wait for the first copy.
        "name": "prefer-wait",
        "kind": "lesson",
        "title": "Wait for the first copy",
        "articles": "RFC 7240 (Prefer), the Idempotency-Key draft's open issue on waiting",
        "idea": "A copy that meets its key in flight is told 409 REQUEST_IN_PROGRESS and has "
        "to poll. With Prefer: wait=N it waits for the first copy instead, parked, holding "
        "no worker and no database connection, woken when the key ends on any instance: "
        "every copy gets the one order, none a 409. Both passes are free of damage; the "
        "figure is the 409s a client had to retry after (the wait shows in p99).",
        "defence": "Prefer: wait",
        "where": "service/domain/keywait.c:keywait_for, service/redis/keyevents_redis.c, "
        "service/redis/cache_scripts.c:watch_lua",
        "unit": "copies told 409 REQUEST_IN_PROGRESS",
        "figure": ["retry_storm.in_progress"],
        "without": lambda n: _pass(load=_storm(n)),
        "with": lambda n: _pass(load=_storm(n) + ["--prefer-wait", "10"]),
    },
    {
        "name": "redis-flush",
        "kind": "fault",
        "title": "Redis flushed mid-storm",
        "articles": "000 §3.3, 002 §3.3",
        "idea": "Redis is an accelerator, not the arbiter: flushed, its records, locks and "
        "in-flight markers are gone. Here the flush lands while each key's first copy is "
        "still in the database (a long transaction holds the orders table); the key's next "
        "copy finds no marker, looks for the order, finds none yet, and inserts a second one. "
        "The unique index makes it wait for the first and answer with that order.",
        "defence": "unique-index",
        "where": "service/domain/inflight_key.c:redis_failed, service/domain/unique_index.c:unique_index_place",
        "unit": "duplicate orders",
        "figure": ["duplicate_orders"],
        # The flush also takes the instances' heartbeats: beating every
        # 100 ms, they are back before the next wave of copies.
        "without": lambda n: _pass("unique-index", NOINDEX_DB, env=STALL_ENV + FREEZE_ENV,
                                   stall=True,
                                   load=_stalled_storm(n) + _flush_then_release(n)),
        "with": lambda n: _pass(env=STALL_ENV + FREEZE_ENV, stall=True,
                                load=_stalled_storm(n) + _flush_then_release(n)),
    },
    {
        "name": "instance-kill",
        "kind": "fault",
        "title": "One instance frozen mid-storm",
        "articles": "000 §4.3",
        "idea": "The second instance is frozen (SIGSTOP: a GC pause, a VM migrated) while its "
        "orders wait in the database. Its heartbeat stops, so the first instance takes over "
        "its in-flight markers and runs the copies the clients send it; then the frozen one "
        "wakes and commits. A kill -9 alone shows 0 here: the database rolls back a dead "
        "connection's transaction, and an order it had committed is found. The unique index "
        "makes the copy wait for the first.",
        "defence": "unique-index",
        "where": "service/domain/inflight_key.c:take_over_dead, service/domain/unique_index.c:unique_index_place",
        "unit": "duplicate orders",
        "figure": ["duplicate_orders"],
        "without": lambda n: _pass("unique-index", NOINDEX_DB, env=STALL_ENV + FREEZE_ENV,
                                   stall=True, load=_freeze_storm(n)),
        "with": lambda n: _pass(env=STALL_ENV + FREEZE_ENV, stall=True, load=_freeze_storm(n)),
    },
    {
        "name": "mysql-restart",
        "kind": "fault",
        "title": "MariaDB restarted mid-storm",
        "articles": "004 §5.4",
        "idea": "While MariaDB is down ticketd answers 503 with Retry-After, and the clients "
        "retry with the same key and token. Remembered, that 503 would be replayed to every "
        "retry.",
        "defence": "forget-failures",
        "where": "service/domain/orders.c:orders_create (remember, end_failure)",
        "unit": "retries refused forever",
        "figure": ["failures_replayed"],
        "without": lambda n: _pass("forget-failures", load=_fstorm(n) + ["@mysql-restart"]),
        "with": lambda n: _pass(load=_fstorm(n) + ["@mysql-restart"]),
    },
    {
        "name": "slow-downstream",
        "kind": "fault",
        "title": "A request slower than the TTLs",
        "articles": "000 §4.3, 004 §5.1",
        "idea": "A marker or lock that expires while its request still runs lets a copy in. "
        "Here the database is the slow part (a long transaction holds the orders table) and "
        "the markers live 300 ms: every copy that comes after one expired looks for the "
        "order, finds none yet, and inserts another. The unique index makes it wait for the "
        "first and answer with that order.",
        "defence": "unique-index",
        "where": "service/domain/unique_index.c:unique_index_place, service/domain/inflight_key.c:take_over_dead",
        "unit": "duplicate orders",
        "figure": ["duplicate_orders"],
        "without": lambda n: _pass("unique-index", NOINDEX_DB, env=STALL_ENV + SHORT_TTL_ENV,
                                   stall=True, load=_slow_storm(n)),
        "with": lambda n: _pass(env=STALL_ENV + SHORT_TTL_ENV, stall=True, load=_slow_storm(n)),
    },
]

BY_NAME = {lesson["name"]: lesson for lesson in LESSONS}



def _check_defences():
    """Every lesson the service's table names is one of these."""
    for d in defences.DEFENCES:
        if d["lesson"] and d["lesson"] not in BY_NAME:
            raise ValueError("defences.def: %s's lesson %s is not in lab/lessons.py" %
                             (d["name"], d["lesson"]))


_check_defences()


def scaler(size):
    """n(x) for a size factor: at least 1, so that a small lab still runs."""
    return lambda x: max(1, int(round(x * size)))


def public(lesson):
    """What the page may see of a lesson (no callables)."""
    keys = ("name", "kind", "title", "articles", "idea", "defence", "where", "unit", "figure")
    out = {k: lesson[k] for k in keys}
    # What the pass without the defence switches off, and what each lets
    # through, from the service's table (the same words its log prints).
    off = lesson["without"](lambda x: x)["off"]
    out["switches_off"] = [{"name": d, "harm": defences.BY_NAME[d]["harm"]}
                           for d in defences.names_of(off)]
    out["judge"] = lesson.get("judge", "damage")
    out["expect"] = lesson.get("expect", "damage")
    return out
