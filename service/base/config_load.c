/* config_load.c - the settings read (config.h): from `--config FILE`,
 * then the environment, which wins; the names that are no setting (a
 * retired one stops start-up, a misspelt one is warned about); then the
 * checks no single bound expresses (config_validate) and the defaults
 * that depend on the machine (config_resolve). What each setting is,
 * its type, bounds and default, is the table in config.c. */
#include "config.h"
#include "config_table.h"

#include "envfile.h"
#include "err.h"
#include "log.h"
#include "util.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Settings that were, and what took their place. The thread pool they
 * sized is gone (requests run on the fibers of one event loop per core):
 * TICKETD_QUEUE_MAX only added to the bound on requests on fibers, and
 * TICKETD_IO_THREADS was read by nothing. (TICKETD_THREADS stays, an
 * alias of TICKETD_LOOPS: see the table in config.c.) */
static const struct retired {
    const char *name;
    const char *instead;
} retired[] = {
    {"TICKETD_QUEUE_MAX", "the requests served at once are bounded by TICKETD_MAX_FIBERS"},
    {"TICKETD_IO_THREADS", "HTTP is served by the event loops, one per core unless TICKETD_LOOPS "
                           "says how many"},
};

bool config_retired(const char *name, char *msg, size_t cap)
{
    for (size_t i = 0; i < sizeof retired / sizeof retired[0]; i++) {
        if (strcmp(name, retired[i].name) == 0) {
            snprintf(msg, cap, "%s is no longer a setting; %s", name, retired[i].instead);
            return true;
        }
    }
    return false;
}

/* TICKETD_* variables that other parts of ticketd's tooling read (the fault
 * points of the test build, scripts/, the tests, the load tool): present in
 * the environment for good reasons, never a misspelt setting. */
static const char *const other_names[] = {
    "TICKETD_CONFIG",
    "TICKETD_FAULT",
    "TICKETD_FAULT_RELEASE",
    "TICKETD_URL",
    "TICKETD_BIN",
    "TICKETD_SKIP_DEPS",
    "TICKETD_SQL_DIR",
    "TICKETD_REDIS_PASSWORD",
    "TICKETD_SERVICES_WAIT_S",
    NULL,
};

static bool other_name(const char *name)
{
    if (strncmp(name, "TICKETD_TEST_", 13) == 0)
        return true;
    for (int i = 0; other_names[i] != NULL; i++) {
        if (strcmp(name, other_names[i]) == 0)
            return true;
    }
    return false;
}

bool config_unknown_warning(const char *name, const char *origin, char *msg, size_t cap)
{
    if (config_is_setting(name) || other_name(name) || config_retired(name, msg, cap))
        return false;
    const char *near = config_closest(name);
    if (near != NULL)
        snprintf(msg, cap, "%s: %s is not a setting of ticketd (ignored); did you mean %s?", origin,
                 name, near);
    else
        snprintf(msg, cap, "%s: %s is not a setting of ticketd (ignored)", origin, name);
    return true;
}

int config_set(struct config *cfg, const char *key, const char *value, char *err, size_t cap)
{
    if (config_retired(key, err, cap))
        return TD_EINVAL;
    return config_apply(cfg, key, value, err, cap);
}

/* An env file's pair (envfile_walk): the environment wins and is checked
 * on its own; a name that is no setting is warned about and skipped. */
static int file_pair(const char *key, const char *value, const char *where, void *ctx, char *why,
                     size_t cap)
{
    if (getenv(key) != NULL)
        return TD_OK;
    if (config_unknown_warning(key, where, why, cap)) {
        fprintf(stderr, "ticketd: warning: %s\n", why);
        return TD_OK;
    }
    return config_set(ctx, key, value, why, cap);
}

int config_parse_file_text(struct config *cfg, const char *text, const char *origin, char *err,
                           size_t cap)
{
    return envfile_walk(text, origin, file_pair, cfg, err, cap);
}

/* A consumer's dedup row must outlive every redelivery of its event: the
 * stream hands a pending entry over after TICKETD_CLAIM_IDLE_MS, up to
 * TICKETD_MAX_DELIVERIES times. And "today" may be moved only where the
 * data is a test's or a demo's: the job drops what it thinks is old. */
static int validate_retention(const struct config *cfg, char *err, size_t cap)
{
    int64_t redelivery_ms = (int64_t)cfg->claim_idle_ms * cfg->max_deliveries;
    int64_t day;
    if ((int64_t)cfg->retain_consume_records_h * 3600000 < redelivery_ms) {
        snprintf(err, cap,
                 "TICKETD_RETAIN_CONSUME_RECORDS_H=%d: shorter than the stream's redelivery window "
                 "(TICKETD_CLAIM_IDLE_MS x TICKETD_MAX_DELIVERIES = %lld ms)",
                 cfg->retain_consume_records_h, (long long)redelivery_ms);
        return TD_EINVAL;
    }
    if (cfg->retention_today[0] == '\0')
        return TD_OK;
    if (!parse_day(cfg->retention_today, &day)) {
        snprintf(err, cap, "TICKETD_RETENTION_TODAY=%s: expected a date, YYYY-MM-DD",
                 cfg->retention_today);
        return TD_EINVAL;
    }
    if (strcmp(cfg->env, "test") != 0 && strcmp(cfg->env, "demo") != 0) {
        snprintf(err, cap, "TICKETD_RETENTION_TODAY is for tests and demos only (TICKETD_ENV=%s)",
                 cfg->env);
        return TD_EINVAL;
    }
    return TD_OK;
}

int config_validate(const struct config *cfg, char *err, size_t cap)
{
    enum log_level lvl;
    struct in_addr addr;
    if (inet_pton(AF_INET, cfg->bind, &addr) != 1) {
        /* Checked here, not when the listener opens: by then the pools and
         * jobs are started, and each would have to be stopped again. */
        snprintf(err, cap, "TICKETD_BIND=%s: expected an IPv4 address, e.g. 127.0.0.1 or 0.0.0.0",
                 cfg->bind);
        return TD_EINVAL;
    }
    if (log_parse_level(cfg->log_level, &lvl) != TD_OK) {
        snprintf(err, cap, "TICKETD_LOG_LEVEL=%s: expected debug, info, warn or error",
                 cfg->log_level);
        return TD_EINVAL;
    }
    if (validate_retention(cfg, err, cap) != TD_OK)
        return TD_EINVAL;
    if (cfg->threads > 0 && cfg->loops > 0 && cfg->threads != cfg->loops) {
        snprintf(err, cap,
                 "TICKETD_THREADS=%d and TICKETD_LOOPS=%d disagree: TICKETD_THREADS is the "
                 "HTTP contract's name for TICKETD_LOOPS, the number of event loops; set one "
                 "of them",
                 cfg->threads, cfg->loops);
        return TD_EINVAL;
    }
    if (cfg->jwt_secret[0] == '\0') {
        snprintf(err, cap, "TICKETD_JWT_SECRET is not set (see config/ticketd.env)");
        return TD_EINVAL;
    }
    if (strlen(cfg->jwt_secret) < 32) {
        snprintf(err, cap, "TICKETD_JWT_SECRET: at least 32 characters are needed for HS256");
        return TD_EINVAL;
    }
    return TD_OK;
}

extern char **environ;

/* One line on stderr per TICKETD_* variable that is no setting: a misspelt
 * name would otherwise leave its default in force without a word. */
static void warn_unknown_environment(void)
{
    char name[128], msg[512];
    for (char **e = environ; *e != NULL; e++) {
        if (strncmp(*e, "TICKETD_", 8) != 0)
            continue;
        size_t n = strcspn(*e, "=");
        if (n >= sizeof name)
            n = sizeof name - 1;
        memcpy(name, *e, n);
        name[n] = '\0';
        if (config_unknown_warning(name, "environment", msg, sizeof msg))
            fprintf(stderr, "ticketd: warning: %s\n", msg);
    }
}

/* The first retired setting present in the environment, as config_retired
 * says it; false when none is. */
static bool retired_in_environment(char *msg, size_t cap)
{
    for (size_t i = 0; i < sizeof retired / sizeof retired[0]; i++) {
        if (getenv(retired[i].name) != NULL)
            return config_retired(retired[i].name, msg, cap);
    }
    return false;
}

void config_resolve(struct config *cfg)
{
    if (cfg->loops == 0)
        cfg->loops = cfg->threads; /* the contract's name for the same number */
    if (cfg->loops == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        cfg->loops = n < 1 ? 1 : n > 256 ? 256 : (int)n;
    }
}

int config_load(struct config *cfg, const char *path)
{
    int rc = TD_EINVAL;
    char err[512];
    char *text = NULL;
    config_defaults(cfg);
    if (path != NULL) {
        if (envfile_read(path, &text) != TD_OK) {
            fprintf(stderr, "ticketd: cannot read config file %s\n", path);
            goto out;
        }
        if (config_parse_file_text(cfg, text, path, err, sizeof err) != TD_OK) {
            fprintf(stderr, "ticketd: %s\n", err);
            goto out;
        }
    }
    warn_unknown_environment();
    if (retired_in_environment(err, sizeof err)) {
        fprintf(stderr, "ticketd: %s\n", err);
        goto out;
    }
    if (config_apply_environment(cfg, err, sizeof err) != TD_OK) {
        fprintf(stderr, "ticketd: %s\n", err);
        goto out;
    }
    if (config_validate(cfg, err, sizeof err) != TD_OK) {
        fprintf(stderr, "ticketd: %s\n", err);
        goto out;
    }
    config_resolve(cfg);
    rc = TD_OK;
out:
    free(text);
    return rc;
}
