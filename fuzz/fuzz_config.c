/* fuzz_config.c - the env-file reader behind --config
 * (config_parse_file_text): comments, quoting, escapes and bounds.
 *
 * Input: the file's text (a C string, so it ends at its first NUL, as
 * read_file hands it over). Invariants: a refusal names a line of the
 * file; an accepted file leaves every setting in its documented bounds
 * (a few that the server cannot run without are checked here), every
 * string set, and parsing the same text again gives the same answer. */
#include "fuzz.h"

#include "config.h"
#include "err.h"

#include <stdbool.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* The real environment wins over the file; clear it so the file is
     * what is parsed. */
    for (;;) {
        bool found = false;
        for (char **e = environ; *e != NULL; e++) {
            if (strncmp(*e, "TICKETD_", 8) == 0) {
                char *name = strndup(*e, strcspn(*e, "="));
                unsetenv(name);
                free(name);
                found = true;
                break;
            }
        }
        if (!found)
            break;
    }
    return 0;
}

static void check_config(const struct config *c)
{
    const char *const strings[] = {c->env,          c->bind,       c->log_level,      c->redis_host,
                                   c->mysql_host,   c->mysql_user, c->mysql_password, c->mysql_db,
                                   c->mysql_socket, c->jwt_secret, c->pay_secret,     c->defenses};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
        CHECK(strings[i] != NULL);
    CHECK(c->port >= 1 && c->port <= 65535);
    CHECK(c->redis_port >= 1 && c->redis_port <= 65535);
    CHECK(c->mysql_port >= 1 && c->mysql_port <= 65535);
    CHECK(c->threads >= 1 && c->threads <= 256);
    CHECK(c->max_body >= 256 && c->max_body <= 1048576);
    CHECK(c->max_per_order >= 1 && c->max_per_order <= 1000);
    CHECK(c->pay_tolerance_s >= 1 && c->pay_tolerance_s <= 86400);
    CHECK(c->tx_retries >= 0 && c->tx_retries <= 50);
    CHECK(c->redis_policy == REDIS_POLICY_DEGRADE || c->redis_policy == REDIS_POLICY_STRICT);
}

static int parse(const char *text, struct config *c, char *err, size_t cap)
{
    config_defaults(c);
    err[0] = '\0';
    int rc = config_parse_file_text(c, text, "fuzz.env", err, cap);
    CHECK(rc == TD_OK || rc == TD_EINVAL);
    CHECK(strlen(err) < cap);
    if (rc == TD_OK) {
        CHECK(err[0] == '\0');
        check_config(c);
    } else {
        CHECK(strncmp(err, "fuzz.env:", 9) == 0);
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fz_strndup(data, size);
    struct config a, b;
    char err_a[512], err_b[512];
    int rc = parse(text, &a, err_a, sizeof err_a);
    CHECK(parse(text, &b, err_b, sizeof err_b) == rc);
    CHECK(strcmp(err_a, err_b) == 0);
    if (rc == TD_OK) {
        CHECK(strcmp(a.jwt_secret, b.jwt_secret) == 0 && a.port == b.port);
        CHECK(strcmp(a.defenses, b.defenses) == 0);
    }
    config_cleanup(&a);
    config_cleanup(&b);
    free(text);
    return 0;
}
