/* fuzz_config.c - the env-file reader behind --config
 * (config_parse_file_text): comments, quoting, escapes and bounds.
 *
 * Input: the file's text (a C string, so it ends at its first NUL, as
 * read_file hands it over). Invariants: a refusal names a line of the
 * file; an accepted file leaves every setting in its documented bounds
 * (a few that the server cannot run without are checked here) and every
 * string set; comment and blank lines around the text change neither the
 * settings nor the reason for a refusal, only the line it names. */
#include "fuzz.h"

#include "config.h"
#include "err.h"

#include <stdbool.h>
#include <unistd.h>

/* The largest input worth trying, a little past the limits the parser
 * enforces (fuzz.mk reads it for -max_len). */
#define FUZZ_MAX_LEN 4096

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

#define N_STRINGS 15

/* The string settings of c, so that they can be compared and cleared. */
static void strings_of(struct config *c, char **out[N_STRINGS])
{
    char **all[N_STRINGS] = {&c->env,
                             &c->bind,
                             &c->log_level,
                             &c->redis_host,
                             &c->mysql_host,
                             &c->mysql_user,
                             &c->mysql_password,
                             &c->mysql_db,
                             &c->mysql_socket,
                             &c->jwt_secret,
                             &c->pay_secret,
                             &c->defences,
                             &c->redis_sentinels,
                             &c->redis_master,
                             &c->retention_today};
    memcpy(out, all, sizeof all);
}

static void check_config(struct config *c)
{
    char **strings[N_STRINGS];
    strings_of(c, strings);
    for (size_t i = 0; i < N_STRINGS; i++)
        CHECK(*strings[i] != NULL);
    CHECK(c->port >= 1 && c->port <= 65535);
    CHECK(c->redis_port >= 1 && c->redis_port <= 65535);
    CHECK(c->mysql_port >= 1 && c->mysql_port <= 65535);
    CHECK(c->threads >= 0 && c->threads <= 256);
    CHECK(c->loops >= 0 && c->loops <= 256);
    CHECK(c->max_fibers >= 1 && c->max_fibers <= 30000);
    CHECK(c->max_body >= 256 && c->max_body <= 1048576);
    CHECK(c->max_per_order >= 1 && c->max_per_order <= 1000);
    CHECK(c->pay_tolerance_s >= 1 && c->pay_tolerance_s <= 86400);
    CHECK(c->tx_retries >= 0 && c->tx_retries <= 50);
    CHECK(c->redis_policy == REDIS_POLICY_DEGRADE || c->redis_policy == REDIS_POLICY_STRICT);
}

/* Every setting equal: the strings by value, the rest byte for byte (both
 * start from config_defaults, which clears the padding too). */
static void check_same(struct config *a, struct config *b)
{
    char **sa[N_STRINGS], **sb[N_STRINGS];
    struct config ca = *a, cb = *b;
    strings_of(a, sa);
    strings_of(b, sb);
    for (size_t i = 0; i < N_STRINGS; i++)
        CHECK(strcmp(*sa[i], *sb[i]) == 0);
    strings_of(&ca, sa);
    strings_of(&cb, sb);
    for (size_t i = 0; i < N_STRINGS; i++)
        *sa[i] = *sb[i] = NULL;
    CHECK(memcmp(&ca, &cb, sizeof ca) == 0);
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

static int error_line(const char *err)
{
    return atoi(err + strlen("fuzz.env:"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fz_strndup(data, size);
    /* The same file with comment and blank lines around it must mean the
     * same, and a refusal must name the same line, two further down. */
    char *framed = malloc(size + 32);
    if (framed == NULL)
        abort();
    snprintf(framed, size + 32, "# fuzz\n\n%s\n  # end\n", text);

    struct config a, b;
    char err_a[512], err_b[512];
    int rc = parse(text, &a, err_a, sizeof err_a);
    CHECK(parse(framed, &b, err_b, sizeof err_b) == rc);
    if (rc == TD_OK) {
        check_same(&a, &b);
    } else {
        CHECK(error_line(err_a) >= 1 && error_line(err_b) == error_line(err_a) + 2);
        CHECK(strcmp(strchr(err_a + 9, ':'), strchr(err_b + 9, ':')) == 0);
    }
    config_cleanup(&a);
    config_cleanup(&b);
    free(framed);
    free(text);
    return 0;
}
