/* test_config.c - the settings table: defaults, parsing and bounds of each
 * type, the env-file format, the environment winning over the file, and
 * the checks across settings. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "config.h"
#include "err.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

#define INT_AT(cfg, off)  (*(const int *)((const char *)(cfg) + (off)))
#define BOOL_AT(cfg, off) (*(const bool *)((const char *)(cfg) + (off)))
#define STR_AT(cfg, off)  (*(char *const *)((const char *)(cfg) + (off)))

/* The tests decide which TICKETD_* variables exist; whatever the shell
 * that runs them exported must not leak in. */
static int clear_ticketd_env(void **state)
{
    (void)state;
    for (;;) {
        char name[128] = "";
        for (char **e = environ; *e != NULL; e++) {
            if (strncmp(*e, "TICKETD_", 8) == 0) {
                size_t n = strcspn(*e, "=");
                if (n < sizeof name) {
                    memcpy(name, *e, n);
                    name[n] = '\0';
                }
                break;
            }
        }
        if (name[0] == '\0')
            return 0;
        unsetenv(name);
    }
}

static void test_defaults(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        size_t off;
        int want;
    } ints[] = {
        {"port", offsetof(struct config, port), 8080},
        {"max_fibers", offsetof(struct config, max_fibers), 4096},
        {"db_conns", offsetof(struct config, db_conns), 8},
        {"max_body", offsetof(struct config, max_body), 16384},
        {"redis_port", offsetof(struct config, redis_port), 6379},
        {"redis_timeout_ms", offsetof(struct config, redis_timeout_ms), 300},
        {"redis_policy", offsetof(struct config, redis_policy), REDIS_POLICY_DEGRADE},
        {"mysql_port", offsetof(struct config, mysql_port), 3306},
        {"tx_retries", offsetof(struct config, tx_retries), 5},
        {"pay_tolerance_s", offsetof(struct config, pay_tolerance_s), 300},
        {"token_ttl_s", offsetof(struct config, token_ttl_s), 600},
        {"max_per_order", offsetof(struct config, max_per_order), 6},
        {"idem_ttl_s", offsetof(struct config, idem_ttl_s), 86400},
        {"inflight_ttl_ms", offsetof(struct config, inflight_ttl_ms), 10000},
        {"lock_ttl_ms", offsetof(struct config, lock_ttl_ms), 5000},
        {"respcache_entries", offsetof(struct config, respcache_entries), 4096},
        {"order_ttl_s", offsetof(struct config, order_ttl_s), 900},
        {"drain_timeout_s", offsetof(struct config, drain_timeout_s), 10},
    };
    static const struct {
        const char *name;
        size_t off;
        const char *want;
    } strs[] = {
        {"env", offsetof(struct config, env), "production"},
        {"bind", offsetof(struct config, bind), "127.0.0.1"},
        {"log_level", offsetof(struct config, log_level), "info"},
        {"mysql_user", offsetof(struct config, mysql_user), "ticketd"},
        {"mysql_db", offsetof(struct config, mysql_db), "ticketd"},
        {"mysql_password", offsetof(struct config, mysql_password), ""},
        {"mysql_socket", offsetof(struct config, mysql_socket), ""},
        {"jwt_secret", offsetof(struct config, jwt_secret), ""},
        {"pay_secret", offsetof(struct config, pay_secret), ""},
        {"defences", offsetof(struct config, defences), "all"},
    };
    struct config cfg;
    config_defaults(&cfg);
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (INT_AT(&cfg, ints[i].off) != ints[i].want)
            fail_msg("%s = %d, want %d", ints[i].name, INT_AT(&cfg, ints[i].off), ints[i].want);
    }
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        assert_non_null(STR_AT(&cfg, strs[i].off));
        assert_string_equal(STR_AT(&cfg, strs[i].off), strs[i].want);
    }
    assert_true(cfg.access_log);
    assert_true(cfg.order_token_required);
    assert_true(cfg.workers);
    config_cleanup(&cfg);
    /* Cleanup leaves no dangling pointers for a second cleanup. */
    assert_null(cfg.env);
    config_cleanup(&cfg);
}

struct set_case {
    const char *key;
    const char *value;
    bool ok;
    size_t off; /* where an accepted value lands */
    int want;   /* int, bool (0/1) or enum index */
    char type;  /* 'i' int or enum, 'b' bool, 's' TICKETD_ENV (the value is kept) */
};

#define OFF(f) offsetof(struct config, f)

static const struct set_case set_cases[] = {
    /* Integers: whole decimal numbers within [min, max], nothing else. */
    {"TICKETD_PORT", "1", true, OFF(port), 1, 'i'},
    {"TICKETD_PORT", "65535", true, OFF(port), 65535, 'i'},
    {"TICKETD_PORT", "0", false, 0, 0, 'i'},
    {"TICKETD_PORT", "65536", false, 0, 0, 'i'},
    {"TICKETD_PORT", "-1", false, 0, 0, 'i'},
    {"TICKETD_PORT", "", false, 0, 0, 'i'},
    {"TICKETD_PORT", "80x", false, 0, 0, 'i'},
    {"TICKETD_PORT", " 80", false, 0, 0, 'i'},
    {"TICKETD_PORT", "+80", false, 0, 0, 'i'},
    {"TICKETD_PORT", "0x50", false, 0, 0, 'i'},
    {"TICKETD_PORT", "99999999999999999999", false, 0, 0, 'i'},
    {"TICKETD_MAX_FIBERS", "1", true, OFF(max_fibers), 1, 'i'},
    {"TICKETD_MAX_FIBERS", "30000", true, OFF(max_fibers), 30000, 'i'},
    {"TICKETD_MAX_FIBERS", "0", false, 0, 0, 'i'},
    {"TICKETD_MAX_FIBERS", "30001", false, 0, 0, 'i'},
    {"TICKETD_LOOPS", "0", true, OFF(loops), 0, 'i'},
    {"TICKETD_LOOPS", "256", true, OFF(loops), 256, 'i'},
    {"TICKETD_LOOPS", "257", false, 0, 0, 'i'},
    {"TICKETD_LOOPS", "-1", false, 0, 0, 'i'},
    /* Retired settings are refused whatever their value (config_retired). */
    {"TICKETD_IO_THREADS", "2", false, 0, 0, 'i'},
    {"TICKETD_QUEUE_MAX", "4096", false, 0, 0, 'i'},
    /* The contract's name for the loops' number (config_resolve). */
    {"TICKETD_THREADS", "32", true, OFF(threads), 32, 'i'},
    {"TICKETD_THREADS", "257", false, 0, 0, 'i'},
    {"TICKETD_MAX_BODY", "255", false, 0, 0, 'i'},
    {"TICKETD_MAX_BODY", "256", true, OFF(max_body), 256, 'i'},
    {"TICKETD_MAX_BODY", "1048576", true, OFF(max_body), 1048576, 'i'},
    {"TICKETD_MAX_BODY", "1048577", false, 0, 0, 'i'},
    {"TICKETD_TX_RETRIES", "0", true, OFF(tx_retries), 0, 'i'},
    {"TICKETD_TX_RETRIES", "51", false, 0, 0, 'i'},
    {"TICKETD_RESPCACHE_ENTRIES", "0", true, OFF(respcache_entries), 0, 'i'},
    {"TICKETD_DRAIN_TIMEOUT_S", "0", true, OFF(drain_timeout_s), 0, 'i'},
    {"TICKETD_MAX_PER_ORDER", "0", false, 0, 0, 'i'},
    {"TICKETD_MAX_PER_ORDER", "1000", true, OFF(max_per_order), 1000, 'i'},

    /* Booleans: the usual words, lowercase. */
    {"TICKETD_ORDER_TOKEN_REQUIRED", "0", true, OFF(order_token_required), 0, 'b'},
    {"TICKETD_ORDER_TOKEN_REQUIRED", "1", true, OFF(order_token_required), 1, 'b'},
    {"TICKETD_ACCESS_LOG", "false", true, OFF(access_log), 0, 'b'},
    {"TICKETD_ACCESS_LOG", "true", true, OFF(access_log), 1, 'b'},
    {"TICKETD_WORKERS", "no", true, OFF(workers), 0, 'b'},
    {"TICKETD_WORKERS", "yes", true, OFF(workers), 1, 'b'},
    {"TICKETD_WORKERS", "off", true, OFF(workers), 0, 'b'},
    {"TICKETD_WORKERS", "on", true, OFF(workers), 1, 'b'},
    {"TICKETD_WORKERS", "2", false, 0, 0, 'b'},
    {"TICKETD_WORKERS", "", false, 0, 0, 'b'},
    {"TICKETD_WORKERS", "TRUE", false, 0, 0, 'b'},
    {"TICKETD_WORKERS", "y", false, 0, 0, 'b'},

    /* Enums: one of the documented choices, exactly. */
    {"TICKETD_REDIS_POLICY", "strict", true, OFF(redis_policy), REDIS_POLICY_STRICT, 'i'},
    {"TICKETD_REDIS_POLICY", "degrade", true, OFF(redis_policy), REDIS_POLICY_DEGRADE, 'i'},
    {"TICKETD_REDIS_POLICY", "STRICT", false, 0, 0, 'i'},
    {"TICKETD_REDIS_POLICY", "", false, 0, 0, 'i'},
    {"TICKETD_REDIS_POLICY", "fail", false, 0, 0, 'i'},
    /* TICKETD_ENV: the four environments, exactly. */
    {"TICKETD_ENV", "dev", true, 0, 0, 's'},
    {"TICKETD_ENV", "test", true, 0, 0, 's'},
    {"TICKETD_ENV", "demo", true, 0, 0, 's'},
    {"TICKETD_ENV", "production", true, 0, 0, 's'},
    {"TICKETD_ENV", "staging", false, 0, 0, 's'},
    {"TICKETD_ENV", "prod", false, 0, 0, 's'},
    {"TICKETD_ENV", "Demo", false, 0, 0, 's'},
    {"TICKETD_ENV", "", false, 0, 0, 's'},

    /* Names are exact. */
    {"TICKETD_NOPE", "1", false, 0, 0, 'i'},
    {"ticketd_port", "80", false, 0, 0, 'i'},
    {"PORT", "80", false, 0, 0, 'i'},
};

static void test_set_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof set_cases / sizeof set_cases[0]; i++) {
        const struct set_case *c = &set_cases[i];
        struct config cfg, before;
        char err[256] = "";
        config_defaults(&cfg);
        memcpy(&before, &cfg, sizeof cfg);
        int rc = config_set(&cfg, c->key, c->value, err, sizeof err);
        if (c->ok) {
            if (rc != TD_OK)
                fail_msg("%s=%s refused: %s", c->key, c->value, err);
            if (c->type == 's') {
                assert_string_equal(cfg.env, c->value);
                config_cleanup(&cfg);
                continue;
            }
            int got = c->type == 'b' ? (int)BOOL_AT(&cfg, c->off) : INT_AT(&cfg, c->off);
            if (got != c->want)
                fail_msg("%s=%s gave %d, want %d", c->key, c->value, got, c->want);
        } else {
            if (rc != TD_EINVAL)
                fail_msg("%s=%s accepted", c->key, c->value);
            /* The reason names the setting, and nothing was changed. */
            if (strstr(err, c->key) == NULL)
                fail_msg("%s=%s: reason '%s' does not name the setting", c->key, c->value, err);
            assert_memory_equal(&cfg, &before, sizeof cfg);
        }
        config_cleanup(&cfg);
    }
}

static void test_set_string_is_copied(void **state)
{
    (void)state;
    struct config cfg;
    char err[256];
    char value[] = "10.0.0.1";
    config_defaults(&cfg);
    assert_int_equal(config_set(&cfg, "TICKETD_BIND", value, err, sizeof err), TD_OK);
    value[0] = 'X';
    assert_string_equal(cfg.bind, "10.0.0.1");
    /* Setting it again replaces (and frees) the first copy. */
    assert_int_equal(config_set(&cfg, "TICKETD_BIND", "0.0.0.0", err, sizeof err), TD_OK);
    assert_string_equal(cfg.bind, "0.0.0.0");
    assert_int_equal(config_set(&cfg, "TICKETD_MYSQL_PASSWORD", "", err, sizeof err), TD_OK);
    assert_string_equal(cfg.mysql_password, "");
    config_cleanup(&cfg);
}

static void test_file_format(void **state)
{
    (void)state;
    static const char text[] = "# ticketd settings\n"
                               "\n"
                               "   # an indented comment\n"
                               "TICKETD_PORT=9000\n"
                               "  TICKETD_MAX_FIBERS = 3  \n"
                               "\t\n"
                               "TICKETD_BIND=\"0.0.0.0\"\n"
                               "TICKETD_MYSQL_USER='shop'\n"
                               "TICKETD_MYSQL_PASSWORD=a=b#c\n"
                               "TICKETD_MYSQL_DB=shop # an inline comment\n"
                               "TICKETD_REDIS_HOST=\"r\\\"1\" # after a quoted value\n"
                               "TICKETD_PAY_SECRET='a #b' \n"
                               "TICKETD_MYSQL_SOCKET=\n"
                               "TICKETD_LOG_LEVEL=\"\"\n"
                               "TICKETD_REDIS_POLICY=strict\r\n"
                               "TICKETD_ENV=\"demo\"\r\n"
                               "TICKETD_WORKERS=off"; /* no final newline */
    struct config cfg;
    char err[256] = "";
    config_defaults(&cfg);
    int rc = config_parse_file_text(&cfg, text, "t.env", err, sizeof err);
    if (rc != TD_OK)
        fail_msg("refused: %s", err);
    assert_int_equal(cfg.port, 9000);
    assert_int_equal(cfg.max_fibers, 3);
    assert_string_equal(cfg.bind, "0.0.0.0");
    assert_string_equal(cfg.mysql_user, "shop");
    /* Only the first '=' separates; a '#' inside a value is not a comment. */
    assert_string_equal(cfg.mysql_password, "a=b#c");
    /* As in Compose: " #" starts a comment after an unquoted value; quotes
     * keep a '#', and double quotes take backslash escapes. */
    assert_string_equal(cfg.mysql_db, "shop");
    assert_string_equal(cfg.redis_host, "r\"1");
    assert_string_equal(cfg.pay_secret, "a #b");
    assert_string_equal(cfg.mysql_socket, "");
    assert_string_equal(cfg.log_level, "");
    /* CRLF line ends (a file saved on Windows) parse like LF. */
    assert_int_equal(cfg.redis_policy, REDIS_POLICY_STRICT);
    assert_string_equal(cfg.env, "demo");
    assert_false(cfg.workers);
    /* What the file does not name keeps its default. */
    assert_int_equal(cfg.redis_port, 6379);
    config_cleanup(&cfg);
}

static void test_file_errors_name_the_line(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *want; /* a substring of the reason */
    } cases[] = {
        {"TICKETD_PORT=9000\n\n# c\nTICKETD_PORT 9000\n", "t.env:4: expected KEY=VALUE"},
        {"TICKETD_MYSQL_DB=\"unbalanced\n", "t.env:1: TICKETD_MYSQL_DB: unterminated quote"},
        {"just words", "t.env:1: expected KEY=VALUE"},
        {"TICKETD_ENV=staging\n",
         "t.env:1: TICKETD_ENV=staging: expected dev, test, demo or production"},
        {"TICKETD_PORT=99999\n", "t.env:1: TICKETD_PORT=99999"},
        {"=9000\n", "t.env:1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct config cfg;
        char err[256] = "";
        config_defaults(&cfg);
        int rc = config_parse_file_text(&cfg, cases[i].text, "t.env", err, sizeof err);
        if (rc != TD_EINVAL)
            fail_msg("case %zu accepted", i);
        if (strstr(err, cases[i].want) == NULL)
            fail_msg("case %zu: reason '%s', want '%s'", i, err, cases[i].want);
        config_cleanup(&cfg);
    }
}

/* A refused choice names every choice, so that the fix is in the message. */
static void test_choices_named(void **state)
{
    (void)state;
    static const struct {
        const char *key, *value, *want;
    } cases[] = {
        {"TICKETD_REDIS_POLICY", "foo", "TICKETD_REDIS_POLICY=foo: expected degrade or strict"},
        {"TICKETD_ENV", "staging", "TICKETD_ENV=staging: expected dev, test, demo or production"},
        {"TICKETD_WORKERS", "2", "expected 1 or 0"},
        {"TICKETD_PORT", "x", "expected an integer from 1 to 65535"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct config cfg;
        char err[256] = "";
        config_defaults(&cfg);
        assert_int_equal(config_set(&cfg, cases[i].key, cases[i].value, err, sizeof err),
                         TD_EINVAL);
        if (strstr(err, cases[i].want) == NULL)
            fail_msg("%s=%s: reason '%s', want '%s'", cases[i].key, cases[i].value, err,
                     cases[i].want);
        config_cleanup(&cfg);
    }
}

/* Unknown names: a warning, with the closest setting within two edits;
 * none for settings and for the variables ticketd's own tools read. */
static void test_unknown_names(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        bool warned;
        const char *closest; /* NULL: no suggestion */
    } cases[] = {
        {"TICKETD_PORT", false, NULL},
        {"TICKETD_REDIS_POLICY", false, NULL},
        {"TICKETD_CONFIG", false, NULL},
        {"TICKETD_FAULT", false, NULL},
        {"TICKETD_TEST_STATE", false, NULL},
        {"TICKETD_TEST_ANYTHING", false, NULL},
        {"TICKETD_REDIS_PASSWORD", false, NULL},
        {"TICKETD_MAX_FIBER", true, "TICKETD_MAX_FIBERS"},  /* one deletion */
        {"TICKETD_REDIS_PROT", true, "TICKETD_REDIS_PORT"}, /* a swap: two edits */
        {"TICKETD_REDIS_POLICYY", true, "TICKETD_REDIS_POLICY"},
        {"TICKETD_DEFENCES", true, "TICKETD_DEFENSES"}, /* British spelling */
        {"TICKETD_MYSQL_PASS", true, NULL},             /* four edits away */
        {"TICKETD_NO_SUCH_SETTING", true, NULL},
        {"TICKETD_", true, NULL},
        {"TICKETD_ENVIRONMENT", true, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char msg[512] = "";
        bool warned = config_unknown_warning(cases[i].name, "t.env:7", msg, sizeof msg);
        if (warned != cases[i].warned)
            fail_msg("%s: warned %d, want %d", cases[i].name, warned, cases[i].warned);
        const char *closest = config_closest(cases[i].name);
        if (!warned)
            continue;
        char want[256];
        snprintf(want, sizeof want, "t.env:7: %s is not a setting of ticketd (ignored)",
                 cases[i].name);
        if (strncmp(msg, want, strlen(want)) != 0)
            fail_msg("%s: message '%s', want it to start '%s'", cases[i].name, msg, want);
        assert_null(strchr(msg, '\n')); /* one line */
        if (cases[i].closest == NULL) {
            if (closest != NULL || strstr(msg, "did you mean") != NULL)
                fail_msg("%s: suggested %s: %s", cases[i].name, closest, msg);
        } else {
            if (closest == NULL || strcmp(closest, cases[i].closest) != 0)
                fail_msg("%s: closest %s, want %s", cases[i].name, closest ? closest : "none",
                         cases[i].closest);
            snprintf(want, sizeof want, "did you mean %s?", cases[i].closest);
            if (strstr(msg, want) == NULL)
                fail_msg("%s: message '%s' lacks '%s'", cases[i].name, msg, want);
        }
    }
}

/* An unknown key in the file is skipped, not fatal; the rest still apply. */
static void test_file_unknown_key_skipped(void **state)
{
    (void)state;
    struct config cfg;
    char err[256] = "";
    config_defaults(&cfg);
    int rc = config_parse_file_text(&cfg,
                                    "\r\n\r\nTICKETD_NOPE=1\r\nTICKETD_PORT=9001\n"
                                    "TICKETD_MAX_FIBER=3\n",
                                    "t.env", err, sizeof err);
    if (rc != TD_OK)
        fail_msg("refused: %s", err);
    assert_int_equal(cfg.port, 9001);
    assert_int_equal(cfg.max_fibers, 4096); /* the default: the misspelt line was ignored */
    config_cleanup(&cfg);
}

static void test_environment_wins_over_file(void **state)
{
    (void)state;
    struct config cfg;
    char err[256] = "";
    assert_int_equal(setenv("TICKETD_PORT", "7000", 1), 0);
    config_defaults(&cfg);
    /* The file's line for a key the environment sets is skipped entirely,
     * even when it would not parse. */
    assert_int_equal(config_parse_file_text(&cfg, "TICKETD_PORT=nonsense\nTICKETD_MAX_FIBERS=3\n",
                                            "t.env", err, sizeof err),
                     TD_OK);
    assert_int_equal(cfg.port, 8080); /* the environment is applied by config_load */
    assert_int_equal(cfg.max_fibers, 3);
    config_cleanup(&cfg);
    unsetenv("TICKETD_PORT");
}

static char *write_temp(const char *text)
{
    char *path = strdup("/tmp/ticketd-test-config-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
    return path;
}

static const char secret_line[] = "TICKETD_JWT_SECRET=0123456789abcdef0123456789abcdef\n";

static void test_load_file_then_environment(void **state)
{
    (void)state;
    char text[512];
    snprintf(text, sizeof text, "%sTICKETD_PORT=9000\nTICKETD_MAX_FIBERS=3\nTICKETD_ENV=dev\n",
             secret_line);
    char *path = write_temp(text);
    struct config cfg;

    setenv("TICKETD_PORT", "7000", 1);
    setenv("TICKETD_REDIS_POLICY", "strict", 1);
    assert_int_equal(config_load(&cfg, path), TD_OK);
    assert_int_equal(cfg.port, 7000);                        /* environment over file */
    assert_int_equal(cfg.max_fibers, 3);                     /* file over default */
    assert_int_equal(cfg.redis_policy, REDIS_POLICY_STRICT); /* environment over default */
    assert_string_equal(cfg.env, "dev");
    assert_int_equal(cfg.max_body, 16384); /* default */
    config_cleanup(&cfg);

    /* A bad value in the environment stops the load like one in the file. */
    setenv("TICKETD_PORT", "70000", 1);
    assert_int_equal(config_load(&cfg, path), TD_EINVAL);
    config_cleanup(&cfg);
    unsetenv("TICKETD_PORT");
    unsetenv("TICKETD_REDIS_POLICY");

    /* Without a file, the environment alone. */
    setenv("TICKETD_JWT_SECRET", "0123456789abcdef0123456789abcdef", 1);
    assert_int_equal(config_load(&cfg, NULL), TD_OK);
    assert_int_equal(cfg.port, 8080);
    config_cleanup(&cfg);
    unsetenv("TICKETD_JWT_SECRET");

    unlink(path);
    free(path);
}

static void test_load_refuses(void **state)
{
    (void)state;
    struct config cfg;
    /* A missing file is an error, not an empty config. */
    assert_int_equal(config_load(&cfg, "/nonexistent/ticketd.env"), TD_EINVAL);
    config_cleanup(&cfg);

    /* A file with a bad line. */
    char *path = write_temp("TICKETD_PORT=9000\nbogus\n");
    assert_int_equal(config_load(&cfg, path), TD_EINVAL);
    config_cleanup(&cfg);
    unlink(path);
    free(path);

    /* A file that is fine line by line but has no JWT secret. */
    path = write_temp("TICKETD_PORT=9000\n");
    assert_int_equal(config_load(&cfg, path), TD_EINVAL);
    config_cleanup(&cfg);
    unlink(path);
    free(path);
}

/* A setting that no longer does anything stops start-up, from the file and
 * from the environment, with a message that names it and what replaced it;
 * it is not taken for a misspelling either. */
static void test_retired_settings_refused(void **state)
{
    (void)state;
    static const struct {
        const char *name, *instead;
    } cases[] = {
        {"TICKETD_QUEUE_MAX", "TICKETD_MAX_FIBERS"},
        {"TICKETD_IO_THREADS", "TICKETD_LOOPS"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct config cfg;
        char err[512] = "", line[128], text[512];
        assert_true(config_retired(cases[i].name, err, sizeof err));
        if (strstr(err, cases[i].name) == NULL || strstr(err, cases[i].instead) == NULL)
            fail_msg("%s: message '%s' lacks its name or %s", cases[i].name, err, cases[i].instead);
        assert_false(config_unknown_warning(cases[i].name, "t.env:1", line, sizeof line));

        snprintf(line, sizeof line, "%s=8\n", cases[i].name);
        config_defaults(&cfg);
        err[0] = '\0';
        assert_int_equal(config_parse_file_text(&cfg, line, "t.env", err, sizeof err), TD_EINVAL);
        if (strstr(err, cases[i].instead) == NULL)
            fail_msg("%s in a file: '%s' lacks %s", cases[i].name, err, cases[i].instead);
        config_cleanup(&cfg);

        snprintf(text, sizeof text, "%s%s", secret_line, line);
        char *path = write_temp(text);
        assert_int_equal(config_load(&cfg, path), TD_EINVAL);
        config_cleanup(&cfg);
        unlink(path);
        free(path);

        path = write_temp(secret_line);
        assert_int_equal(config_load(&cfg, path), TD_OK);
        config_cleanup(&cfg);
        setenv(cases[i].name, "8", 1);
        assert_int_equal(config_load(&cfg, path), TD_EINVAL);
        config_cleanup(&cfg);
        unsetenv(cases[i].name);
        unlink(path);
        free(path);
    }
    assert_false(config_retired("TICKETD_MAX_FIBERS", (char[8]){0}, 8));
}

/* Case i of a table: config_validate gives want, and its reason holds why.
 * Takes cfg (cleaned up here). */
static void expect_validate(struct config *cfg, size_t i, int want, const char *why)
{
    char err[256] = "";
    int rc = config_validate(cfg, err, sizeof err);
    if (rc != want)
        fail_msg("case %zu: rc %d, want %d (%s)", i, rc, want, err);
    if (strstr(err, why) == NULL)
        fail_msg("case %zu: reason '%s', want '%s'", i, err, why);
    config_cleanup(cfg);
}

static void test_validate(void **state)
{
    (void)state;
    static const struct {
        const char *secret;
        const char *log_level;
        int want;
        const char *why; /* a substring of the reason */
    } cases[] = {
        {"", "info", TD_EINVAL, "TICKETD_JWT_SECRET is not set"},
        {"short", "info", TD_EINVAL, "at least 32"},
        {"0123456789abcdef0123456789abcde", "info", TD_EINVAL, "at least 32"}, /* 31 */
        {"0123456789abcdef0123456789abcdef", "info", TD_OK, ""},               /* 32 */
        {"0123456789abcdef0123456789abcdef", "debug", TD_OK, ""},
        {"0123456789abcdef0123456789abcdef", "error", TD_OK, ""},
        {"0123456789abcdef0123456789abcdef", "verbose", TD_EINVAL, "TICKETD_LOG_LEVEL"},
        {"0123456789abcdef0123456789abcdef", "INFO", TD_EINVAL, "TICKETD_LOG_LEVEL"},
        {"0123456789abcdef0123456789abcdef", "", TD_EINVAL, "TICKETD_LOG_LEVEL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct config cfg;
        char err[256] = "";
        config_defaults(&cfg);
        config_set(&cfg, "TICKETD_JWT_SECRET", cases[i].secret, err, sizeof err);
        config_set(&cfg, "TICKETD_LOG_LEVEL", cases[i].log_level, err, sizeof err);
        expect_validate(&cfg, i, cases[i].want, cases[i].why);
    }
}

/* Consumer rows must outlive the stream's redelivery window, and the
 * retention job's clock moves only in tests and demos. */
static void test_validate_retention(void **state)
{
    (void)state;
    static const struct {
        const char *name, *value, *env;
        int want;
        const char *why;
    } cases[] = {
        {"TICKETD_RETAIN_CONSUME_RECORDS_H", "1", "production", TD_OK, ""},
        {"TICKETD_CLAIM_IDLE_MS", "3600000", "production", TD_EINVAL, "redelivery window"},
        {"TICKETD_RETENTION_TODAY", "2026-12-09", "test", TD_OK, ""},
        {"TICKETD_RETENTION_TODAY", "2026-12-09", "demo", TD_OK, ""},
        {"TICKETD_RETENTION_TODAY", "2026-12-09", "production", TD_EINVAL, "tests and demos"},
        {"TICKETD_RETENTION_TODAY", "2026-02-30", "test", TD_EINVAL, "YYYY-MM-DD"},
        {"TICKETD_RETENTION_TODAY", "tomorrow", "test", TD_EINVAL, "YYYY-MM-DD"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct config cfg;
        char err[256] = "";
        config_defaults(&cfg);
        config_set(&cfg, "TICKETD_JWT_SECRET", "0123456789abcdef0123456789abcdef", err, sizeof err);
        config_set(&cfg, "TICKETD_ENV", cases[i].env, err, sizeof err);
        /* An hour of consumer rows: enough for 5 s x 5 deliveries (the
         * defaults), not for 1 h x 5. */
        config_set(&cfg, "TICKETD_RETAIN_CONSUME_RECORDS_H", "1", err, sizeof err);
        assert_int_equal(config_set(&cfg, cases[i].name, cases[i].value, err, sizeof err), TD_OK);
        expect_validate(&cfg, i, cases[i].want, cases[i].why);
    }
}

/* TICKETD_BIND is an IPv4 address, refused at start-up, before any pool
 * or job is started, when it is not one. */
static void test_validate_bind(void **state)
{
    (void)state;
    static const struct {
        const char *bind;
        int want;
        const char *why;
    } cases[] = {
        {"127.0.0.1", TD_OK, ""},
        {"0.0.0.0", TD_OK, ""},
        {"localhost", TD_EINVAL, "TICKETD_BIND=localhost"},
        {"::1", TD_EINVAL, "IPv4"},
        {"127.0.0.256", TD_EINVAL, "IPv4"},
        {"", TD_EINVAL, "IPv4"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct config cfg;
        char err[256] = "";
        config_defaults(&cfg);
        config_set(&cfg, "TICKETD_JWT_SECRET", "0123456789abcdef0123456789abcdef", err, sizeof err);
        assert_int_equal(config_set(&cfg, "TICKETD_BIND", cases[i].bind, err, sizeof err), TD_OK);
        expect_validate(&cfg, i, cases[i].want, cases[i].why);
    }
}

/* TICKETD_LOOPS=0, the default, is one loop per online core; a number
 * given is kept. */
static void test_loops_default_to_the_cores(void **state)
{
    (void)state;
    struct config cfg;
    config_defaults(&cfg);
    assert_int_equal(cfg.loops, 0);
    config_resolve(&cfg);
    assert_int_equal(cfg.loops, (int)sysconf(_SC_NPROCESSORS_ONLN));
    cfg.loops = 3;
    config_resolve(&cfg);
    assert_int_equal(cfg.loops, 3);
    config_cleanup(&cfg);
}

/* TICKETD_THREADS, the HTTP contract's name, sets the same number as
 * TICKETD_LOOPS; both set to different numbers is refused, naming both. */
static void test_threads_set_the_loops(void **state)
{
    (void)state;
    struct config cfg;
    char err[256] = "";
    config_defaults(&cfg);
    config_set(&cfg, "TICKETD_JWT_SECRET", "0123456789abcdef0123456789abcdef", err, sizeof err);
    assert_int_equal(config_set(&cfg, "TICKETD_THREADS", "5", err, sizeof err), TD_OK);
    assert_int_equal(config_validate(&cfg, err, sizeof err), TD_OK);
    config_resolve(&cfg);
    assert_int_equal(cfg.loops, 5);
    assert_int_equal(config_set(&cfg, "TICKETD_LOOPS", "5", err, sizeof err), TD_OK);
    assert_int_equal(config_validate(&cfg, err, sizeof err), TD_OK);
    assert_int_equal(config_set(&cfg, "TICKETD_LOOPS", "2", err, sizeof err), TD_OK);
    assert_int_equal(config_validate(&cfg, err, sizeof err), TD_EINVAL);
    assert_non_null(strstr(err, "TICKETD_THREADS=5 and TICKETD_LOOPS=2"));
    config_cleanup(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_loops_default_to_the_cores),
        cmocka_unit_test(test_threads_set_the_loops),
        cmocka_unit_test(test_validate_retention),
        cmocka_unit_test(test_validate_bind),
        cmocka_unit_test(test_set_table),
        cmocka_unit_test(test_set_string_is_copied),
        cmocka_unit_test(test_file_format),
        cmocka_unit_test(test_file_errors_name_the_line),
        cmocka_unit_test(test_choices_named),
        cmocka_unit_test(test_unknown_names),
        cmocka_unit_test(test_file_unknown_key_skipped),
        cmocka_unit_test(test_environment_wins_over_file),
        cmocka_unit_test(test_load_file_then_environment),
        cmocka_unit_test(test_load_refuses),
        cmocka_unit_test(test_retired_settings_refused),
        cmocka_unit_test(test_validate),
    };
    return cmocka_run_group_tests(tests, clear_ticketd_env, NULL);
}
