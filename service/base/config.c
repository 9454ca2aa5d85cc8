/* config.c - the settings table (config.h): each TICKETD_* setting's
 * type, bounds and default, a value parsed onto its field, the defaults,
 * the log of what is in force. Where the values come from (the file, the
 * environment) and the checks of the whole are config_load.c's. */
#include "config.h"
#include "config_table.h"

#include "err.h"
#include "log.h"
#include "util.h"

#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum setting_type { T_INT, T_BOOL, T_STR, T_ENUM };

/* One row per setting: the whole surface of ticketd's configuration. The
 * shape is Redis's static_configs[]: name, type, where it lands, bounds. */
struct setting {
    const char *name;
    enum setting_type type;
    size_t offset;
    long long min, max; /* T_INT only */
    const char *def;
    bool secret;
    const char *const *choices; /* T_ENUM, or T_STR limited to these; NULL-terminated */
};

static const char *const policy_choices[] = {"degrade", "strict", NULL};
static const char *const env_choices[] = {"dev", "test", "demo", "production", NULL};

#define OFF(field) offsetof(struct config, field)

static const struct setting settings[] = {
    {"TICKETD_ENV", T_STR, OFF(env), 0, 0, "production", false, env_choices},
    {"TICKETD_BIND", T_STR, OFF(bind), 0, 0, "127.0.0.1", false, NULL},
    {"TICKETD_PORT", T_INT, OFF(port), 1, 65535, "8080", false, NULL},
    {"TICKETD_LOOPS", T_INT, OFF(loops), 0, 256, "0", false, NULL},
    /* An alias of TICKETD_LOOPS, kept because the HTTP contract names it:
     * the number of event loops (each on a thread of its own), not a
     * thread per request. config_resolve takes it when TICKETD_LOOPS is
     * not set; config_validate refuses the two set to different numbers. */
    {"TICKETD_THREADS", T_INT, OFF(threads), 0, 256, "0", false, NULL},
    {"TICKETD_MAX_FIBERS", T_INT, OFF(max_fibers), 1, 30000, "4096", false, NULL},
    {"TICKETD_DB_CONNS", T_INT, OFF(db_conns), 1, 1024, "8", false, NULL},
    {"TICKETD_MAX_BODY", T_INT, OFF(max_body), 256, 1048576, "16384", false, NULL},
    {"TICKETD_CONN_LIMIT", T_INT, OFF(conn_limit), 4, 100000, "4096", false, NULL},
    {"TICKETD_CONN_TIMEOUT_S", T_INT, OFF(conn_timeout_s), 1, 3600, "30", false, NULL},
    {"TICKETD_CONN_PER_IP", T_INT, OFF(conn_per_ip), 0, 100000, "512", false, NULL},
    {"TICKETD_HEADER_TIMEOUT_S", T_INT, OFF(header_timeout_s), 1, 3600, "10", false, NULL},
    {"TICKETD_REQUEST_TIMEOUT_S", T_INT, OFF(request_timeout_s), 1, 3600, "30", false, NULL},
    {"TICKETD_DRAIN_TIMEOUT_S", T_INT, OFF(drain_timeout_s), 0, 600, "10", false, NULL},
    {"TICKETD_ACCESS_LOG", T_BOOL, OFF(access_log), 0, 0, "1", false, NULL},
    {"TICKETD_LOG_LEVEL", T_STR, OFF(log_level), 0, 0, "info", false, NULL},

    {"TICKETD_REDIS_HOST", T_STR, OFF(redis_host), 0, 0, "127.0.0.1", false, NULL},
    {"TICKETD_REDIS_PORT", T_INT, OFF(redis_port), 1, 65535, "6379", false, NULL},
    {"TICKETD_REDIS_SENTINELS", T_STR, OFF(redis_sentinels), 0, 0, "", false, NULL},
    {"TICKETD_REDIS_MASTER", T_STR, OFF(redis_master), 0, 0, "", false, NULL},
    {"TICKETD_REDIS_TIMEOUT_MS", T_INT, OFF(redis_timeout_ms), 10, 60000, "300", false, NULL},
    {"TICKETD_REDIS_POLICY", T_ENUM, OFF(redis_policy), 0, 0, "degrade", false, policy_choices},

    {"TICKETD_MYSQL_HOST", T_STR, OFF(mysql_host), 0, 0, "127.0.0.1", false, NULL},
    {"TICKETD_MYSQL_PORT", T_INT, OFF(mysql_port), 1, 65535, "3306", false, NULL},
    {"TICKETD_MYSQL_USER", T_STR, OFF(mysql_user), 0, 0, "ticketd", false, NULL},
    {"TICKETD_MYSQL_PASSWORD", T_STR, OFF(mysql_password), 0, 0, "", true, NULL},
    {"TICKETD_MYSQL_DB", T_STR, OFF(mysql_db), 0, 0, "ticketd", false, NULL},
    {"TICKETD_MYSQL_SOCKET", T_STR, OFF(mysql_socket), 0, 0, "", false, NULL},
    {"TICKETD_MYSQL_TIMEOUT_S", T_INT, OFF(mysql_timeout_s), 1, 600, "5", false, NULL},
    {"TICKETD_MYSQL_SYNC_WAIT", T_INT, OFF(mysql_sync_wait), 0, 15, "1", false, NULL},
    {"TICKETD_TX_RETRIES", T_INT, OFF(tx_retries), 0, 50, "5", false, NULL},
    {"TICKETD_MERGE", T_BOOL, OFF(merge), 0, 0, "1", false, NULL},
    {"TICKETD_MERGE_MAX", T_INT, OFF(merge_max), 1, 256, "64", false, NULL},

    {"TICKETD_JWT_SECRET", T_STR, OFF(jwt_secret), 0, 0, "", true, NULL},
    {"TICKETD_PAY_SECRET", T_STR, OFF(pay_secret), 0, 0, "", true, NULL},
    {"TICKETD_PAY_TOLERANCE_S", T_INT, OFF(pay_tolerance_s), 1, 86400, "300", false, NULL},

    {"TICKETD_TOKEN_TTL_S", T_INT, OFF(token_ttl_s), 1, 86400, "600", false, NULL},
    {"TICKETD_ORDER_TOKEN_REQUIRED", T_BOOL, OFF(order_token_required), 0, 0, "1", false, NULL},
    {"TICKETD_MAX_PER_ORDER", T_INT, OFF(max_per_order), 1, 1000, "6", false, NULL},
    {"TICKETD_IDEM_TTL_S", T_INT, OFF(idem_ttl_s), 1, 30 * 86400, "86400", false, NULL},
    {"TICKETD_INFLIGHT_TTL_MS", T_INT, OFF(inflight_ttl_ms), 100, 600000, "10000", false, NULL},
    {"TICKETD_MAX_WAIT_S", T_INT, OFF(max_wait_s), 1, 300, "10", false, NULL},
    {"TICKETD_LOCK_TTL_MS", T_INT, OFF(lock_ttl_ms), 100, 600000, "5000", false, NULL},
    {"TICKETD_INSTANCE_TTL_MS", T_INT, OFF(instance_ttl_ms), 300, 600000, "3000", false, NULL},
    {"TICKETD_RESPCACHE_ENTRIES", T_INT, OFF(respcache_entries), 0, 10000000, "4096", false, NULL},

    {"TICKETD_ORDER_TTL_S", T_INT, OFF(order_ttl_s), 1, 30 * 86400, "900", false, NULL},
    {"TICKETD_SWEEP_INTERVAL_MS", T_INT, OFF(sweep_interval_ms), 10, 3600000, "1000", false, NULL},
    {"TICKETD_WORKERS", T_BOOL, OFF(workers), 0, 0, "1", false, NULL},
    {"TICKETD_DEFENSES", T_STR, OFF(defences), 0, 0, "all", false, NULL},
    {"TICKETD_RELAY_BATCH", T_INT, OFF(relay_batch), 1, 10000, "100", false, NULL},
    {"TICKETD_CONSUMER_BLOCK_MS", T_INT, OFF(consumer_block_ms), 1, 60000, "200", false, NULL},
    {"TICKETD_CLAIM_IDLE_MS", T_INT, OFF(claim_idle_ms), 10, 3600000, "5000", false, NULL},
    {"TICKETD_MAX_DELIVERIES", T_INT, OFF(max_deliveries), 1, 1000, "5", false, NULL},

    {"TICKETD_RETENTION_INTERVAL_MS", T_INT, OFF(retention_interval_ms), 100, 86400000, "300000",
     false, NULL},
    {"TICKETD_RETENTION_AHEAD_DAYS", T_INT, OFF(retention_ahead_days), 1, 60, "3", false, NULL},
    {"TICKETD_RETAIN_OUTBOX_H", T_INT, OFF(retain_outbox_h), 1, 87600, "168", false, NULL},
    {"TICKETD_RETAIN_CONSUME_RECORDS_H", T_INT, OFF(retain_consume_records_h), 1, 87600, "168",
     false, NULL},
    {"TICKETD_RETAIN_DEAD_LETTERS_H", T_INT, OFF(retain_dead_letters_h), 1, 87600, "168", false,
     NULL},
    {"TICKETD_RETAIN_IDEMPOTENCY_RECORDS_H", T_INT, OFF(retain_idempotency_records_h), 1, 87600,
     "168", false, NULL},
    {"TICKETD_RETENTION_TODAY", T_STR, OFF(retention_today), 0, 0, "", false, NULL},

    {"TICKETD_BLOOM_EXPECTED_KEYS", T_INT, OFF(bloom_expected_keys), 1000, 400000000, "1000000",
     false, NULL},
    {"TICKETD_BLOOM_FALSE_POSITIVES_PER_MILLION", T_INT, OFF(bloom_fp_per_million), 1, 500000,
     "10000", false, NULL},
    {"TICKETD_BLOOM_CHECK_MS", T_INT, OFF(bloom_check_ms), 100, 3600000, "5000", false, NULL},
};

#define N_SETTINGS (sizeof settings / sizeof settings[0])

static const struct setting *find_setting(const char *name)
{
    size_t n = N_SETTINGS;
    return lfind(&name, settings, &n, sizeof settings[0], name_first_cmp);
}

/* Writes "a, b or c" into out. */
static void list_choices(const char *const *choices, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; choices[i] != NULL && len < cap; i++) {
        const char *sep = i == 0 ? "" : choices[i + 1] == NULL ? " or " : ", ";
        int n = snprintf(out + len, cap - len, "%s%s", sep, choices[i]);
        if (n < 0)
            break;
        len += (size_t)n;
    }
}

static int choice_index(const struct setting *s, const char *value, char *err, size_t cap)
{
    char names[128];
    for (int i = 0; s->choices[i] != NULL; i++) {
        if (strcmp(value, s->choices[i]) == 0)
            return i;
    }
    list_choices(s->choices, names, sizeof names);
    snprintf(err, cap, "%s=%s: expected %s", s->name, value, names);
    return -1;
}

static int apply(struct config *cfg, const struct setting *s, const char *value, char *err,
                 size_t cap)
{
    char *base = (char *)cfg + s->offset;
    int64_t v;
    switch (s->type) {
    case T_INT:
        if (!parse_i64(value, s->min, s->max, &v)) {
            snprintf(err, cap, "%s=%s: expected an integer from %lld to %lld", s->name, value,
                     s->min, s->max);
            return TD_EINVAL;
        }
        *(int *)base = (int)v;
        return TD_OK;
    case T_BOOL:
        if (strcmp(value, "1") == 0 || strcmp(value, "true") == 0 || strcmp(value, "yes") == 0 ||
            strcmp(value, "on") == 0) {
            *(bool *)base = true;
        } else if (strcmp(value, "0") == 0 || strcmp(value, "false") == 0 ||
                   strcmp(value, "no") == 0 || strcmp(value, "off") == 0) {
            *(bool *)base = false;
        } else {
            snprintf(err, cap, "%s=%s: expected 1 or 0 (true/false, yes/no, on/off)", s->name,
                     value);
            return TD_EINVAL;
        }
        return TD_OK;
    case T_STR: {
        if (s->choices != NULL && choice_index(s, value, err, cap) < 0)
            return TD_EINVAL;
        char **slot = (char **)base;
        free(*slot);
        *slot = xstrdup(value);
        return TD_OK;
    }
    case T_ENUM: {
        int i = choice_index(s, value, err, cap);
        if (i < 0)
            return TD_EINVAL;
        *(int *)base = i;
        return TD_OK;
    }
    }
    return TD_EINTERNAL;
}

bool config_is_setting(const char *name)
{
    return find_setting(name) != NULL;
}

int config_apply(struct config *cfg, const char *name, const char *value, char *err, size_t cap)
{
    const struct setting *s = find_setting(name);
    if (s == NULL) {
        snprintf(err, cap, "%s: unknown setting", name);
        return TD_EINVAL;
    }
    return apply(cfg, s, value, err, cap);
}

int config_apply_environment(struct config *cfg, char *err, size_t cap)
{
    for (size_t i = 0; i < N_SETTINGS; i++) {
        const char *v = getenv(settings[i].name);
        if (v != NULL && apply(cfg, &settings[i], v, err, cap) != TD_OK)
            return TD_EINVAL;
    }
    return TD_OK;
}

/* Levenshtein distance, given up (returning limit + 1) for long names. */
static size_t edit_distance(const char *a, const char *b, size_t limit)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t row[128];
    if (la >= sizeof row / sizeof row[0] || lb >= sizeof row / sizeof row[0])
        return limit + 1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] == b[j - 1] ? 0 : 1);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *config_closest(const char *name)
{
    const char *best = NULL;
    size_t best_d = CONFIG_SUGGEST_DISTANCE + 1;
    for (size_t i = 0; i < N_SETTINGS; i++) {
        size_t d = edit_distance(name, settings[i].name, CONFIG_SUGGEST_DISTANCE);
        if (d < best_d) {
            best_d = d;
            best = settings[i].name;
        }
    }
    return best;
}

void config_defaults(struct config *cfg)
{
    char err[256];
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < N_SETTINGS; i++) {
        if (apply(cfg, &settings[i], settings[i].def, err, sizeof err) != TD_OK) {
            fprintf(stderr, "bad built-in default: %s\n", err);
            abort();
        }
    }
}

void config_log(const struct config *cfg)
{
    for (size_t i = 0; i < N_SETTINGS; i++) {
        const struct setting *s = &settings[i];
        const char *base = (const char *)cfg + s->offset;
        switch (s->type) {
        case T_INT:
            log_info("config %s=%d", s->name, *(const int *)base);
            break;
        case T_BOOL:
            log_info("config %s=%d", s->name, *(const bool *)base ? 1 : 0);
            break;
        case T_ENUM:
            log_info("config %s=%s", s->name, s->choices[*(const int *)base]);
            break;
        case T_STR: {
            const char *v = *(char *const *)base;
            if (s->secret)
                log_info("config %s=%s", s->name, v[0] ? "********" : "(unset)");
            else
                log_info("config %s=%s", s->name, v);
            break;
        }
        }
    }
}

void config_cleanup(struct config *cfg)
{
    for (size_t i = 0; i < N_SETTINGS; i++) {
        if (settings[i].type == T_STR) {
            char **slot = (char **)((char *)cfg + settings[i].offset);
            free(*slot);
            *slot = NULL;
        }
    }
}
