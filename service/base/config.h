/* config.h - every setting of ticketd, from one table.
 *
 * Each setting is an environment variable TICKETD_*; `--config FILE` holds
 * the same KEY=VALUE lines (a Compose env_file) and the real environment
 * wins over it. A value out of bounds stops start-up with a message naming
 * the setting, and so does a setting that no longer exists
 * (config_retired). The loaded config is immutable and read by all
 * threads. */
#ifndef TICKETD_CONFIG_H
#define TICKETD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

enum redis_policy { REDIS_POLICY_DEGRADE, REDIS_POLICY_STRICT };

struct config {
    char *env; /* dev, test, demo or production: nothing else is accepted */
    char *bind;
    int port;
    int loops;      /* event loops, one HTTP daemon each; 0 (the default): one per online core */
    int threads;    /* TICKETD_THREADS, an alias of TICKETD_LOOPS (config_resolve) */
    int max_fibers; /* requests on fibers at once, over every loop (503 beyond) */
    int db_conns;   /* MySQL connections the loops share (borrowed per request) */
    int max_body;
    int conn_limit;
    int conn_timeout_s;
    int conn_per_ip;       /* connections one client address may hold; 0: no limit */
    int header_timeout_s;  /* deadline for a whole request head on an idle connection */
    int request_timeout_s; /* deadline for a whole request, head and body */
    int drain_timeout_s;
    bool access_log;
    char *log_level;

    char *redis_host;
    int redis_port;
    char *redis_sentinels; /* "host:port,...": ask these for the primary (sentinel.h) */
    char *redis_master;    /* the name the Sentinels know the primary by */
    int redis_timeout_ms;
    int redis_policy; /* enum redis_policy */

    char *mysql_host;
    int mysql_port;
    char *mysql_user;
    char *mysql_password;
    char *mysql_db;
    char *mysql_socket;
    int mysql_timeout_s;
    int mysql_sync_wait; /* Galera's wsrep_sync_wait for every connection; 0: the server's */
    int tx_retries;
    bool merge;    /* new orders that arrive together share one transaction */
    int merge_max; /* the most orders one such transaction carries */

    char *jwt_secret;
    char *pay_secret;
    int pay_tolerance_s;

    int token_ttl_s;
    bool order_token_required;
    int max_per_order;
    int idem_ttl_s;
    int inflight_ttl_ms;
    int max_wait_s; /* the longest Prefer: wait=N honoured (keywait.h) */
    int lock_ttl_ms;
    int instance_ttl_ms; /* a process's liveness key (liveness.h) */
    int respcache_entries;

    int order_ttl_s;
    int sweep_interval_ms;
    bool workers;
    char *defences;
    int relay_batch;
    int consumer_block_ms;
    int claim_idle_ms;
    int max_deliveries;

    /* Day partitions of the dedup and relay tables (retention.h). */
    int retention_interval_ms;
    int retention_ahead_days;
    int retain_outbox_h;
    int retain_consume_records_h;
    int retain_dead_letters_h;
    int retain_idempotency_records_h;
    char *retention_today; /* tests and demos only: the day the job takes as today */

    /* The order-key Bloom filter (bloom.h, bloom_job.h). */
    int bloom_expected_keys;
    int bloom_fp_per_million;
    int bloom_check_ms;
};

/* Settings that no longer do anything: one that is set, in the
 * environment or in the file, stops start-up with a message naming it and
 * what to use instead (a value silently ignored misleads whoever tunes
 * it). When name is one, writes that message into msg and returns true. */
bool config_retired(const char *name, char *msg, size_t cap);

/* Fills cfg with the defaults, then the file (if path is not NULL), then the
 * environment. On error prints the reason to stderr and returns TD_EINVAL;
 * cfg must still be given to config_cleanup(). */
int config_load(struct config *cfg, const char *path);

/* Settings whose default depends on the machine: TICKETD_LOOPS=0 becomes
 * the number of online cores. config_load calls it. */
void config_resolve(struct config *cfg);

/* Parses one KEY=VALUE assignment onto cfg. Exposed for the unit tests.
 * Returns TD_OK, or TD_EINVAL with a reason in err (cap bytes). */
int config_set(struct config *cfg, const char *key, const char *value, char *err, size_t cap);

/* Parses the text of an env file onto cfg; keys present in the real
 * environment are skipped (the environment wins), unknown keys are warned
 * about on stderr and skipped. */
int config_parse_file_text(struct config *cfg, const char *text, const char *origin, char *err,
                           size_t cap);

/* A name that is neither a setting nor a TICKETD_* variable the tooling
 * reads (TICKETD_CONFIG, TICKETD_FAULT, TICKETD_TEST_*, ...): writes a
 * one-line warning into msg, "ORIGIN: NAME is not a setting ... did you mean
 * X?" when a setting is within CONFIG_SUGGEST_DISTANCE edits, and returns
 * true. Unknown names are warned about, never fatal: config_load prints one
 * line on stderr for each, from the environment and from the file. */
#define CONFIG_SUGGEST_DISTANCE 2
bool config_unknown_warning(const char *name, const char *origin, char *msg, size_t cap);
/* The setting closest to name within CONFIG_SUGGEST_DISTANCE edits, or NULL. */
const char *config_closest(const char *name);

void config_defaults(struct config *cfg);
/* Checks the combinations no single bound expresses. */
int config_validate(const struct config *cfg, char *err, size_t cap);
/* Logs the effective config, secrets masked. */
void config_log(const struct config *cfg);
void config_cleanup(struct config *cfg);

#endif
