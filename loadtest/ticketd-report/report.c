/*
 * ticketd-report - the replay lab's report: turns the runs of a demo
 * (ticketd-load --json files, one per scenario, grouped into runs that each
 * switched some defences off) into report.md, the data files of its charts
 * and the gnuplot script that draws them.
 *
 *   ticketd-report --runs FILE --out DIR [--meta TEXT]...
 *
 * FILE has one line per scenario run, tab-separated:
 *
 *   run  label  off  database  expect  purpose  scenario  json  command
 *
 * run is the run's number (lines of one run are consecutive), label a short
 * name for the charts, off the defences switched off ("none"), database a
 * description of the database used, expect "none", "damage" or "may" (the
 * defences left cannot stop every case; timing decides), purpose one
 * sentence on what the run shows, json the ticketd-load --json file
 * (relative to DIR unless absolute) and command the ticketd-load command
 * line. Each --meta TEXT is a line under the report's title.
 *
 * Exit status: 0 every run meant to hold held; 2 a run meant to hold found
 * damage; 1 a run had errors or a file could not be read or written.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUNS_MAX      64
#define SCENARIOS_MAX 16
#define META_MAX      16

/* The damage columns, in the order of the table; json is the key under
 * "damage" in ticketd-load's JSON. */
static const struct {
    const char *json;
    const char *column;
    const char *words;
    const char *unit; /* what it counts: kinds of one unit share a chart panel */
} damage_cols[] = {
    {"oversold_seats", "oversold (seats)", "oversold seats", "seats"},
    {"duplicate_orders", "dup. orders", "duplicate orders for one key", "orders"},
    {"token_reused_orders", "token-reused orders", "orders beyond one per order token", "orders"},
    {"paid_cancelled_orders", "paid+cancelled orders", "orders both paid and cancelled", "orders"},
    {"lock_bypassed_orders", "orders past lock", "orders past a held session lock", "orders"},
    {"double_applied_payments", "double paid (payments)", "double-applied payments", "payments"},
    {"refunded_applied_payments", "paid+refunded (payments)", "applied payments also refunded",
     "payments"},
    {"double_credited_points", "double points", "double-credited points", "points"},
    {"missing_points", "missing points", "missing points", "points"},
    {"failures_replayed", "refused forever (answers)",
     "answers refusing a retry forever (a failure replayed)", "answers"},
    {"forbidden_answers", "forbidden answers", "answers the contract forbids", "answers"},
    {"cart_items_bought_twice", "cart items twice (orders)",
     "cart items bought twice (orders beyond one per item key)", "orders"},
    {"wrong_refusals", "wrong refusals (answers)", "keys with an order told 409", "answers"},
    {"audit_failed_checks", "audit failed (checks)", "failed audit checks", "checks"},
};

/* The units of the damage chart's panels, in order; failed audit checks are
 * a symptom of the others, not a unit of damage, and get no panel. */
static const char *const damage_units[] = {"seats", "orders", "payments", "points", "answers"};

#define DAMAGE_UNITS (sizeof(damage_units) / sizeof(damage_units[0]))

#define DAMAGE_COLS (sizeof(damage_cols) / sizeof(damage_cols[0]))

/* Who caught a duplicate: replays by layer, rejections by layer, replayed
 * payment callbacks. The chart's columns. */
static const char *const layer_cols[] = {
    "response-cache",    "inflight-key",   "session-lock",  "token",          "unique-index",
    "check-then-insert", "callback-dedup", "state-machine", "consumer-dedup",
};

#define LAYER_COLS (sizeof(layer_cols) / sizeof(layer_cols[0]))

/* What a run should show: every defence that matters is on (none), one
 * that matters is off (damage), or the layer left cannot stop every case
 * and timing decides (may). */
enum expect { EXPECT_NONE, EXPECT_DAMAGE, EXPECT_MAY };

struct scenario {
    char *name;
    char *command;
    char *json_path;
    char *json_full; /* json_path, relative to the working directory */
    json_t *json;    /* owned; NULL if unreadable */
};

struct run {
    int number;
    char *label;
    char *off;
    char *database;
    enum expect expect;
    char *purpose;
    struct scenario scen[SCENARIOS_MAX];
    int count;
};

static struct run runs[RUNS_MAX];
static int run_count;

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n == 0 ? 1 : n, size == 0 ? 1 : size);

    if (p == NULL) {
        fprintf(stderr, "ticketd-report: out of memory\n");
        abort();
    }
    return p;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = xcalloc(1, n);

    memcpy(p, s, n);
    return p;
}

/* ---- reading ------------------------------------------------------------ */

static json_t *jget(const json_t *j, const char *path)
{
    char key[64];
    const char *p = path;
    const json_t *cur = j;

    while (cur != NULL && *p != '\0') {
        size_t n = strcspn(p, ".");

        if (n >= sizeof(key))
            return NULL;
        memcpy(key, p, n);
        key[n] = '\0';
        cur = json_object_get(cur, key);
        p += n;
        if (*p == '.')
            p++;
    }
    return (json_t *)cur;
}

static long long jint(const json_t *j, const char *path)
{
    json_t *v = j != NULL ? jget(j, path) : NULL;

    if (json_is_integer(v))
        return (long long)json_integer_value(v);
    if (json_is_real(v))
        return (long long)json_real_value(v);
    return 0;
}

static double jnum(const json_t *j, const char *path)
{
    json_t *v = j != NULL ? jget(j, path) : NULL;

    return json_is_number(v) ? json_number_value(v) : 0.0;
}

static const char *jstr(const json_t *j, const char *path)
{
    json_t *v = j != NULL ? jget(j, path) : NULL;
    const char *s = json_string_value(v);

    return s != NULL ? s : "";
}

/* Splits line at tabs into at most n fields (in place). Returns the count. */
static int split_tabs(char *line, char **fields, int n)
{
    int k = 0;
    char *p = line;

    while (k < n) {
        char *tab = strchr(p, '\t');

        fields[k++] = p;
        if (tab == NULL)
            break;
        *tab = '\0';
        p = tab + 1;
    }
    return k;
}

static int runs_read(const char *path, const char *dir)
{
    char line[8192];
    FILE *f = fopen(path, "r");
    int rc = -1;

    if (f == NULL) {
        fprintf(stderr, "ticketd-report: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        char *fld[9];
        size_t n = strlen(line);
        struct run *r;
        struct scenario *sc;
        json_error_t err;
        char full[4096];

        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n == 0 || line[0] == '#')
            continue;
        if (split_tabs(line, fld, 9) != 9) {
            fprintf(stderr, "ticketd-report: %s: a line without 9 fields: %s\n", path, line);
            goto out;
        }
        if (run_count == 0 || runs[run_count - 1].number != atoi(fld[0])) {
            if (run_count == RUNS_MAX) {
                fprintf(stderr, "ticketd-report: more than %d runs\n", RUNS_MAX);
                goto out;
            }
            r = &runs[run_count++];
            r->number = atoi(fld[0]);
            r->label = xstrdup(fld[1]);
            r->off = xstrdup(fld[2]);
            r->database = xstrdup(fld[3]);
            r->expect = strcmp(fld[4], "damage") == 0 ? EXPECT_DAMAGE
                        : strcmp(fld[4], "may") == 0  ? EXPECT_MAY
                                                      : EXPECT_NONE;
            r->purpose = xstrdup(fld[5]);
        }
        r = &runs[run_count - 1];
        if (r->count == SCENARIOS_MAX) {
            fprintf(stderr, "ticketd-report: more than %d scenarios in run %d\n", SCENARIOS_MAX,
                    r->number);
            goto out;
        }
        sc = &r->scen[r->count++];
        sc->name = xstrdup(fld[6]);
        sc->json_path = xstrdup(fld[7]);
        sc->command = xstrdup(fld[8]);
        if (fld[7][0] == '/')
            snprintf(full, sizeof(full), "%s", fld[7]);
        else
            snprintf(full, sizeof(full), "%s/%s", dir, fld[7]);
        sc->json_full = xstrdup(full);
        sc->json = json_load_file(full, 0, &err);
        if (sc->json == NULL)
            fprintf(stderr, "ticketd-report: run %d %s: %s: %s\n", r->number, sc->name, full,
                    err.text);
    }
    rc = 0;
out:
    fclose(f);
    return rc;
}

/* ---- figures of one scenario ---------------------------------------------- */

static long long damage_total(const json_t *j)
{
    return jint(j, "damage.total");
}

/* The copies redeliver.sh sent in this scenario ("redeliver: delivered N
 * entries" in the scenario's printed output, the .txt beside its JSON), or
 * 0. */
static long long redelivered(const struct scenario *sc)
{
    char path[4096], line[1024];
    size_t n = strlen(sc->json_full);
    long long copies = 0;
    FILE *f;

    if (n < 5 || strcmp(sc->json_full + n - 5, ".json") != 0 || n >= sizeof(path))
        return 0;
    snprintf(path, sizeof(path), "%.*s.txt", (int)(n - 5), sc->json_full);
    f = fopen(path, "r");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        long long v;

        if (sscanf(line, "redeliver: delivered %lld entries", &v) == 1)
            copies += v;
    }
    fclose(f);
    return copies;
}

static bool is_off(const struct run *r, const char *defence)
{
    size_t n = strlen(defence);

    for (const char *p = r->off; *p != '\0';) {
        size_t k = strcspn(p, ",");

        if (k == n && strncmp(p, defence, n) == 0)
            return true;
        p += k;
        if (*p == ',')
            p++;
    }
    return false;
}

/* The consumer groups that read ticketd's stream (points and ticketing):
 * each copy of an event reaches both. */
#define CONSUMER_GROUPS 2

/* What a layer caught in one scenario: order replays it answered, order
 * rejections it produced, (callback-dedup) callbacks replayed, (state-machine)
 * second payments of a paid order that did not pay it again but were
 * answered DUPLICATE_PAYMENT and sent for refund, or (consumer-dedup) event
 * copies a consumer group skipped. ticketd-load does not see the consumers:
 * their catches are the copies redeliver.sh sent times the groups, when the
 * dedup row by business key is on and no points were credited twice. */
static long long caught_by(const struct run *r, const struct scenario *sc, const char *layer)
{
    const json_t *j = sc->json;
    json_t *answers = json_object_get(j, "answers");
    json_t *a;
    size_t i;
    long long n = 0;

    json_array_foreach(answers, i, a)
    {
        const char *kind = jstr(a, "kind");
        long long status = jint(a, "status");

        /* An attempt the client sent again caught nothing: its retry's
         * answer is the one that counts. */
        if (json_is_true(json_object_get(a, "retried")))
            continue;
        if (strcmp(layer, "callback-dedup") == 0) {
            if (strcmp(kind, "callbacks") == 0 && status == 200 &&
                json_is_true(json_object_get(a, "replayed")))
                n += jint(a, "count");
            continue;
        }
        if (strcmp(layer, "state-machine") == 0) {
            if (strcmp(kind, "callbacks") == 0 && status == 200 &&
                !json_is_true(json_object_get(a, "replayed")) &&
                strcmp(jstr(a, "code"), "DUPLICATE_PAYMENT") == 0)
                n += jint(a, "count");
            continue;
        }
        if (strcmp(layer, "consumer-dedup") == 0)
            continue;
        if (strcmp(kind, "orders") != 0 || strcmp(jstr(a, "layer"), layer) != 0)
            continue;
        if ((status == 201 && json_is_true(json_object_get(a, "replayed"))) || status >= 400)
            n += jint(a, "count");
    }
    if (strcmp(layer, "consumer-dedup") == 0 && !is_off(r, "consumer-dedup") &&
        !is_off(r, "consumer-dedup-business-key") && jint(j, "damage.double_credited_points") == 0)
        n = redelivered(sc) * CONSUMER_GROUPS;
    return n;
}

/* ---- text helpers ------------------------------------------------------------ */

/* A growing string, bounded only by memory. */
struct sbuf {
    char *p;
    size_t len;
    size_t cap;
};

static void sb_add(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_add(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap == 0 ? 256 : b->cap;
        char *p;

        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        p = realloc(b->p, cap);
        if (p == NULL) {
            fprintf(stderr, "ticketd-report: out of memory\n");
            abort();
        }
        b->p = p;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static const char *sb_str(const struct sbuf *b)
{
    return b->p != NULL ? b->p : "";
}

/* "layer a 12, layer b 3" for the replays of one scenario, or "-". */
static void replays_text(const json_t *j, struct sbuf *out)
{
    json_t *by = jget(j, "replays.by_layer");
    const char *k;
    json_t *v;
    bool any = false;

    json_object_foreach(by, k, v)
    {
        sb_add(out, "%s%s %lld", any ? ", " : "", k[0] != '\0' ? k : "(none)",
               (long long)json_integer_value(v));
        any = true;
    }
    if (!any)
        sb_add(out, "-");
}

/* "409 SOLD_OUT 186, 409 REQUEST_IN_PROGRESS @inflight-key 12" over the
 * load requests, or "-". */
static void rejections_text(const json_t *j, struct sbuf *out)
{
    json_t *answers = json_object_get(j, "answers");
    json_t *a;
    size_t i;
    bool any = false;

    json_array_foreach(answers, i, a)
    {
        const char *kind = jstr(a, "kind");
        const char *code = jstr(a, "code");
        const char *layer = jstr(a, "layer");

        if (strcmp(kind, "control") == 0 || jint(a, "status") < 400 ||
            json_is_true(json_object_get(a, "retried")))
            continue;
        bool order = strcmp(kind, "orders") == 0;

        sb_add(out, "%s%s%s%lld %s%s%s %lld", any ? ", " : "", order ? "" : kind, order ? "" : " ",
               jint(a, "status"), code[0] != '\0' ? code : "-", layer[0] != '\0' ? " @" : "", layer,
               jint(a, "count"));
        any = true;
    }
    if (!any)
        sb_add(out, "-");
}

/* "orders 503 DEPENDENCY_UNAVAILABLE 12, orders no answer 3": the attempts
 * the client sent again, by what they got, or "-". */
static void retried_text(const json_t *j, struct sbuf *out)
{
    json_t *after = jget(j, "retries.after");
    const char *k;
    json_t *v;
    bool any = false;

    json_object_foreach(after, k, v)
    {
        sb_add(out, "%s%s %lld", any ? ", " : "", k, (long long)json_integer_value(v));
        any = true;
    }
    if (!any)
        sb_add(out, "-");
}

/* What a client placing an order ended with: the last answer of each order
 * request, by status and code ("201 new 40, 201 replayed 200, 409
 * REQUEST_IN_PROGRESS 60"), or "-". */
static void client_text(const json_t *j, struct sbuf *out)
{
    json_t *answers = json_object_get(j, "answers");
    long long created = 0, replayed = 0;
    json_t *a;
    size_t i;
    bool any = false;

    json_array_foreach(answers, i, a)
    {
        if (strcmp(jstr(a, "kind"), "orders") != 0 || jint(a, "status") != 201 ||
            json_is_true(json_object_get(a, "retried")))
            continue;
        if (json_is_true(json_object_get(a, "replayed")))
            replayed += jint(a, "count");
        else
            created += jint(a, "count");
    }
    if (created + replayed > 0) {
        sb_add(out, "201 new %lld, 201 replayed %lld", created, replayed);
        any = true;
    }
    json_array_foreach(answers, i, a)
    {
        const char *code = jstr(a, "code");
        long long status = jint(a, "status");

        if (strcmp(jstr(a, "kind"), "orders") != 0 || status == 201 ||
            json_is_true(json_object_get(a, "retried")))
            continue;
        if (status == 0)
            sb_add(out, "%sno answer %lld", any ? ", " : "", jint(a, "count"));
        else
            sb_add(out, "%s%lld %s %lld", any ? ", " : "", status, code[0] != '\0' ? code : "-",
                   jint(a, "count"));
        any = true;
    }
    if (!any)
        sb_add(out, "-");
}

/* ---- the report ---------------------------------------------------------------- */

struct run_sum {
    long long damage[DAMAGE_COLS];
    long long damage_total;
    long long caught[LAYER_COLS];
    long long orders;
    long long requests;
    bool errors;
    bool missing;
    const char *first_error;
};

static void run_sum(const struct run *r, struct run_sum *s)
{
    memset(s, 0, sizeof(*s));
    for (int i = 0; i < r->count; i++) {
        const json_t *j = r->scen[i].json;

        if (j == NULL) {
            s->missing = true;
            continue;
        }
        for (size_t d = 0; d < DAMAGE_COLS; d++) {
            char path[64];

            snprintf(path, sizeof(path), "damage.%s", damage_cols[d].json);
            s->damage[d] += jint(j, path);
        }
        s->damage_total += damage_total(j);
        for (size_t l = 0; l < LAYER_COLS; l++)
            s->caught[l] += caught_by(r, &r->scen[i], layer_cols[l]);
        s->orders += jint(j, "orders_created");
        s->requests += jint(j, "requests.total");
        if (jint(j, "exit_code") == 1 || jint(j, "errors.count") > 0) {
            s->errors = true;
            if (s->first_error == NULL) {
                json_t *first = jget(j, "errors.first");

                s->first_error = json_string_value(json_array_get(first, 0));
                if (s->first_error == NULL && jint(j, "unanswered") > 0)
                    s->first_error = "requests without a definite answer after the retries";
            }
        }
    }
}

/* Each kind of damage in its own unit: "3 oversold seats, 12 answers the
 * contract forbids"; "none". */
static void damage_words(const struct run_sum *s, struct sbuf *out)
{
    bool any = false;

    for (size_t d = 0; d < DAMAGE_COLS; d++) {
        if (s->damage[d] == 0)
            continue;
        sb_add(out, "%s%lld %s", any ? ", " : "", s->damage[d], damage_cols[d].words);
        any = true;
    }
    if (!any)
        sb_add(out, "none");
}

static void caught_words(const struct run_sum *s, struct sbuf *out)
{
    bool any = false;

    for (size_t l = 0; l < LAYER_COLS; l++) {
        if (s->caught[l] == 0)
            continue;
        sb_add(out, "%s%s %lld", any ? ", " : "", layer_cols[l], s->caught[l]);
        any = true;
    }
    if (!any)
        sb_add(out, "none");
}

static bool order_layer(const char *layer)
{
    static const char *const order_layers[] = {"response-cache", "inflight-key", "session-lock",
                                               "token", "unique-index"};

    for (size_t i = 0; i < sizeof(order_layers) / sizeof(order_layers[0]); i++)
        if (strcmp(layer, order_layers[i]) == 0)
            return true;
    return false;
}

static size_t damage_index(const char *json)
{
    for (size_t d = 0; d < DAMAGE_COLS; d++)
        if (strcmp(damage_cols[d].json, json) == 0)
            return d;
    abort();
}

static size_t layer_index(const char *layer)
{
    for (size_t l = 0; l < LAYER_COLS; l++)
        if (strcmp(layer_cols[l], layer) == 0)
            return l;
    abort();
}

/* Where a switched-off defence let duplicates through and a later one
 * stopped them, said with the damage it prevented: "duplicate orders 0 —
 * caught by token 24000". Empty when nothing was off or nothing applies. */
static void attribution(const struct run *r, const struct run_sum *s, struct sbuf *out)
{
    bool orders_off = false;
    long long dup = s->damage[damage_index("duplicate_orders")] +
                    s->damage[damage_index("token_reused_orders")];
    long long sm = s->caught[layer_index("state-machine")];
    bool any = false;

    for (size_t l = 0; l < LAYER_COLS; l++)
        if (order_layer(layer_cols[l]) && is_off(r, layer_cols[l]))
            orders_off = true;
    if (orders_off) {
        struct sbuf who = {0};
        bool w = false;

        for (size_t l = 0; l < LAYER_COLS; l++) {
            if (s->caught[l] == 0 || is_off(r, layer_cols[l]) ||
                (!order_layer(layer_cols[l]) && strcmp(layer_cols[l], "check-then-insert") != 0))
                continue;
            sb_add(&who, "%s%s %lld", w ? ", " : "", layer_cols[l], s->caught[l]);
            w = true;
        }
        if (dup == 0 && w)
            sb_add(out, "duplicate orders 0 — the layers left caught them: %s", sb_str(&who));
        else if (w)
            sb_add(out,
                   "%lld orders beyond one per key or token got through; the layers left "
                   "caught the rest: %s",
                   dup, sb_str(&who));
        any = w;
        free(who.p);
    }
    if (is_off(r, "callback-dedup") && s->damage[damage_index("double_applied_payments")] == 0 &&
        sm > 0)
        sb_add(out,
               "%sdouble paid 0 — the state machine stopped it: %lld second payments of a paid "
               "order were answered DUPLICATE_PAYMENT (and sent for refund) instead of paying "
               "it again",
               any ? "; " : "", sm);
}

/* The verdict of a run, and its contribution to the exit status. */
static int run_verdict(const struct run *r, const struct run_sum *s, struct sbuf *out)
{
    struct sbuf dmg = {0};
    struct sbuf who = {0};
    int rc = 0;

    damage_words(s, &dmg);
    caught_words(s, &who);
    if (s->missing) {
        sb_add(out, "INCOMPLETE: a scenario left no figures (see the demo's output)");
        rc = 1;
    } else if (s->damage_total > 0 && r->expect == EXPECT_DAMAGE) {
        sb_add(out, "DAMAGE, as expected with %s off: %s", r->off, sb_str(&dmg));
    } else if (s->damage_total > 0 && r->expect == EXPECT_MAY) {
        sb_add(out,
               "DAMAGE, which the defences left cannot always prevent: %s (the rest was "
               "caught by: %s)",
               sb_str(&dmg), sb_str(&who));
    } else if (s->damage_total > 0) {
        sb_add(out, "DAMAGE FOUND although this run should hold: %s", sb_str(&dmg));
        rc = 2;
    } else if (r->expect == EXPECT_DAMAGE) {
        sb_add(out,
               "no damage this time, although it can happen with %s off: the duplicates "
               "did not meet (a timing race); run the demo again",
               r->off);
    } else {
        sb_add(out, "no damage; duplicates caught by: %s", sb_str(&who));
    }
    if (s->errors) {
        sb_add(out, "; the run had errors (%s)", s->first_error != NULL ? s->first_error : "?");
        if (rc == 0)
            rc = 1;
    }
    free(dmg.p);
    free(who.p);
    return rc;
}

/* Escapes the | of a markdown table cell. */
static void md_cell(FILE *f, const char *s)
{
    for (; *s != '\0'; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else
            fputc(*s, f);
    }
}

/* A scenario's name, and the fault it ran with, when and for how long:
 * the row of a fault run says which fault its figures are under. */
static void scenario_cell(FILE *f, const struct scenario *sc)
{
    const char *cmd = jstr(sc->json, "fault.command");
    struct sbuf b = {0};

    if (cmd[0] == '\0') {
        md_cell(f, sc->name);
        return;
    }
    if (jnum(sc->json, "fault.started_s") < 0)
        sb_add(&b, "%s, fault `%s` (never ran)", sc->name, cmd);
    else
        sb_add(&b, "%s, fault `%s` from %.2f s to %.2f s of %.2f s", sc->name, cmd,
               jnum(sc->json, "fault.started_s"), jnum(sc->json, "fault.ended_s"),
               jnum(sc->json, "fault.load_end_s"));
    md_cell(f, sb_str(&b));
    free(b.p);
}

static void write_run(FILE *f, const struct run *r, const struct run_sum *sum, const char *verdict)
{
    struct sbuf attr = {0}, who = {0};

    if (strcmp(r->off, "none") != 0)
        fprintf(f, "\n## Run %d: %s off\n\n", r->number, r->off);
    else if (strcmp(r->label, "all on") == 0)
        fprintf(f, "\n## Run %d: all defences on\n\n", r->number);
    else
        fprintf(f, "\n## Run %d: all defences on (%s)\n\n", r->number, r->label);
    fprintf(f, "- **switched off:** %s\n", strcmp(r->off, "none") == 0 ? "nothing" : r->off);
    fprintf(f, "- **database:** %s\n", r->database);
    fprintf(f, "- **expected:** %s\n",
            r->expect == EXPECT_DAMAGE ? "damage"
            : r->expect == EXPECT_MAY  ? "damage possible"
                                       : "no damage");
    fprintf(f, "- **why:** %s\n\n", r->purpose);

    fprintf(f, "| scenario | requests | orders created | replays by layer | rejections by code | "
               "retried after | no final answer |");
    for (size_t d = 0; d < DAMAGE_COLS; d++)
        fprintf(f, " %s |", damage_cols[d].column);
    fprintf(f, " p50 ms | p99 ms | req/s | exit |\n|---|--:|--:|---|---|---|--:|");
    for (size_t d = 0; d < DAMAGE_COLS; d++)
        fprintf(f, "--:|");
    fprintf(f, "--:|--:|--:|--:|\n");
    for (int i = 0; i < r->count; i++) {
        const struct scenario *sc = &r->scen[i];
        const json_t *j = sc->json;
        struct sbuf rep = {0}, rej = {0}, ret = {0};

        if (j == NULL) {
            fprintf(f, "| %s | (no figures) |||||||||||||||||||\n", sc->name);
            continue;
        }
        replays_text(j, &rep);
        rejections_text(j, &rej);
        retried_text(j, &ret);
        fprintf(f, "| ");
        scenario_cell(f, sc);
        fprintf(f, " | %lld | %lld | ", jint(j, "requests.total"), jint(j, "orders_created"));
        md_cell(f, sb_str(&rep));
        fprintf(f, " | ");
        md_cell(f, sb_str(&rej));
        fprintf(f, " | ");
        md_cell(f, sb_str(&ret));
        fprintf(f, " | %lld |", jint(j, "unanswered"));
        for (size_t d = 0; d < DAMAGE_COLS; d++) {
            char path[64];
            long long v;

            snprintf(path, sizeof(path), "damage.%s", damage_cols[d].json);
            v = jint(j, path);
            fprintf(f, v > 0 ? " **%lld** |" : " %lld |", v);
        }
        fprintf(f, " %.2f | %.2f | %.0f | %lld |\n", jnum(j, "latency_ms.p50"),
                jnum(j, "latency_ms.p99"), jnum(j, "throughput_rps"), jint(j, "exit_code"));
        free(rep.p);
        free(rej.p);
        free(ret.p);
    }
    fprintf(f, "\n**Verdict:** %s.\n", verdict);
    caught_words(sum, &who);
    fprintf(f, "\n**Caught, by layer:** %s.\n", sb_str(&who));
    attribution(r, sum, &attr);
    if (attr.len > 0)
        fprintf(f, "\n**What the defences left stopped:** %s.\n", sb_str(&attr));
    free(attr.p);
    free(who.p);
    for (int i = 0; i < r->count; i++) {
        const json_t *j = r->scen[i].json;
        struct sbuf saw = {0};

        if (j == NULL)
            continue;
        if (i == 0)
            fprintf(f, "\nWhat a client placing an order saw (the last answer of each order "
                       "request, after its retries):\n\n");
        client_text(j, &saw);
        fprintf(f, "- %s: ", r->scen[i].name);
        md_cell(f, sb_str(&saw));
        fprintf(f, "; sent again %lld times; %lld without a definite answer\n",
                jint(j, "retries.total"), jint(j, "unanswered"));
        if (json_is_object(jget(j, "fault")))
            fprintf(f,
                    "- fault: `%s`, from %.2f s (after %lld answers) to %.2f s of the load "
                    "(which ended at %.2f s, %lld answers later), exit %lld\n",
                    jstr(j, "fault.command"), jnum(j, "fault.started_s"),
                    jint(j, "fault.answers_before"), jnum(j, "fault.ended_s"),
                    jnum(j, "fault.load_end_s"), jint(j, "fault.answers_after"),
                    jint(j, "fault.exit_status"));
        free(saw.p);
    }
    for (int i = 0; i < r->count; i++) {
        const json_t *j = r->scen[i].json;
        json_t *notes = jget(j, "notes.first");
        json_t *n;
        size_t k;

        if (i == 0)
            fprintf(f, "\nWhat the scenarios counted:\n\n");
        json_array_foreach(notes, k, n) fprintf(f, "- %s\n", json_string_value(n));
        if (jint(j, "forbidden_answers.count") > 0) {
            fprintf(f, "- %s: **%lld answers the contract forbids** (damage); first:\n",
                    r->scen[i].name, jint(j, "forbidden_answers.count"));
            json_array_foreach(jget(j, "forbidden_answers.first"), k, n)
            {
                fprintf(f, "  - ");
                md_cell(f, json_string_value(n));
                fprintf(f, "\n");
            }
        }
        if (jint(j, "observations.count") > 0)
            fprintf(f, "- %s: %lld observations, not damage (first: %s)\n", r->scen[i].name,
                    jint(j, "observations.count"),
                    json_string_value(json_array_get(jget(j, "observations.first"), 0)));
    }
    fprintf(f, "\nCommands, to run again from the checkout against `make run` after `make reset`, "
               "with ticketd restarted as `TICKETD_ENV=demo TICKETD_DEFENSES=");
    if (strcmp(r->off, "none") == 0)
        fprintf(f, "all");
    for (const char *p = r->off; strcmp(r->off, "none") != 0 && *p != '\0'; p++)
        fprintf(f, "%s%c", p == r->off || p[-1] == ',' ? "-" : "", *p);
    fprintf(f,
            " build/%s/ticketd serve --config config/ticketd.env` (the run's settings are at "
            "the top of its logs/):\n\n```\n",
            strstr(r->label, "slower") != NULL ? "faults" : "release");
    for (int i = 0; i < r->count; i++)
        fprintf(f, "%s\n", r->scen[i].command);
    fprintf(f, "```\n");
}

/* The verdict in a few words, for the summary table. */
static const char *run_verdict_short(const struct run *r, const struct run_sum *s)
{
    if (s->missing)
        return "incomplete";
    if (s->damage_total > 0)
        return r->expect == EXPECT_NONE ? "DAMAGE, unexpected" : "DAMAGE, as expected";
    if (s->errors)
        return "no damage, run errors";
    return r->expect == EXPECT_DAMAGE ? "no damage this time" : "holds";
}

static void write_summary(FILE *f, struct run_sum *sums)
{
    fprintf(f, "\n## Summary\n\n");
    fprintf(f, "| run | switched off | database | scenarios | orders | duplicates caught by | "
               "damage, each in its unit | forbidden answers | what the defences left stopped | "
               "verdict |\n|--:|---|---|---|--:|---|---|--:|---|---|\n");
    for (int i = 0; i < run_count; i++) {
        const struct run *r = &runs[i];
        struct sbuf who = {0}, dmg = {0}, attr = {0};
        long long forbidden = sums[i].damage[damage_index("forbidden_answers")];

        caught_words(&sums[i], &who);
        damage_words(&sums[i], &dmg);
        attribution(r, &sums[i], &attr);
        fprintf(f, "| %d | %s | %s | ", r->number, strcmp(r->off, "none") == 0 ? "nothing" : r->off,
                r->database);
        for (int k = 0; k < r->count; k++)
            fprintf(f, "%s%s", k > 0 ? ", " : "", r->scen[k].name);
        fprintf(f, " | %lld | %s | %s%s%s | ", sums[i].orders, sb_str(&who),
                sums[i].damage_total > 0 ? "**" : "", sb_str(&dmg),
                sums[i].damage_total > 0 ? "**" : "");
        fprintf(f, forbidden > 0 ? "**%lld** | " : "%lld | ", forbidden);
        md_cell(f, attr.len > 0 ? sb_str(&attr) : "-");
        fprintf(f, " | %s |\n", run_verdict_short(r, &sums[i]));
        free(who.p);
        free(dmg.p);
        free(attr.p);
    }
}

/* ---- chart data and script -------------------------------------------------------- */

static FILE *open_out(const char *dir, const char *name)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    if (f == NULL)
        fprintf(stderr, "ticketd-report: cannot write %s: %s\n", path, strerror(errno));
    return f;
}

/* gnuplot strings are double-quoted: keep the label printable. */
static void gp_label(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s != '\0'; s++)
        if (*s != '"' && *s != '\\')
            fputc(*s, f);
    fputc('"', f);
}

static int write_bars(const char *dir, const char *name, struct run_sum *sums, bool damage)
{
    FILE *f = open_out(dir, name);
    size_t cols = damage ? DAMAGE_COLS - 1 : LAYER_COLS; /* audit is not a unit of damage */

    if (f == NULL)
        return -1;
    fprintf(f, "run");
    for (size_t c = 0; c < cols; c++)
        fprintf(f, "\t\"%s\"", damage ? damage_cols[c].words : layer_cols[c]);
    fprintf(f, "\n");
    for (int i = 0; i < run_count; i++) {
        fprintf(f, "\"%d %s\"", runs[i].number, runs[i].label);
        for (size_t c = 0; c < cols; c++) {
            long long v = damage ? sums[i].damage[c] : sums[i].caught[c];

            /* A log scale has no 0: an empty bar is NaN. */
            if (v > 0)
                fprintf(f, "\t%lld", v);
            else
                fprintf(f, "\tNaN");
        }
        fprintf(f, "\n");
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* Where each run begins on the timeline (seconds since the first run
 * began; -1 when it has no figures) and the series' sampling interval. */
static double run_start[RUNS_MAX];
static double series_interval_s;
static double timeline_t0; /* the first run's start, unix seconds */

/* timeline.dat: one block per run (two blank lines apart), one line per
 * interval: seconds since the first run began, req/s, p50, p99. A blank
 * line between the scenarios of a run breaks the line across the pause. */
static int write_timeline(const char *dir)
{
    FILE *f = open_out(dir, "timeline.dat");
    double t0 = 0;

    if (f == NULL)
        return -1;
    for (int i = 0; i < run_count; i++)
        for (int k = 0; k < runs[i].count; k++) {
            double s = jnum(runs[i].scen[k].json, "started_unix");
            double iv = jnum(runs[i].scen[k].json, "series.interval_s");

            if (s > 0 && (t0 == 0 || s < t0))
                t0 = s;
            if (iv > 0 && series_interval_s == 0)
                series_interval_s = iv;
        }
    timeline_t0 = t0;
    fprintf(f, "# t_s\trps\tp50_ms\tp99_ms\trun\n");
    for (int i = 0; i < run_count; i++) {
        run_start[i] = -1;
        if (i > 0)
            fprintf(f, "\n\n");
        for (int k = 0; k < runs[i].count; k++) {
            const json_t *j = runs[i].scen[k].json;
            json_t *pts = jget(j, "series.points");
            double start = jnum(j, "started_unix") - t0;
            json_t *p;
            size_t n;

            if (k > 0)
                fprintf(f, "\n");
            if (j == NULL || start < 0)
                continue;
            if (run_start[i] < 0)
                run_start[i] = start;
            json_array_foreach(pts, n, p)
            {
                if (jint(p, "requests") == 0)
                    continue;
                fprintf(f, "%.3f\t%.1f\t%.3f\t%.3f\t%d\n", start + jnum(p, "t"), jnum(p, "rps"),
                        jnum(p, "p50_ms"), jnum(p, "p99_ms"), runs[i].number);
            }
        }
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* The intervals of the time series, in words: "200 ms". */
static void interval_words(char *out, size_t cap)
{
    if (series_interval_s <= 0)
        snprintf(out, cap, "interval");
    else if (series_interval_s < 1)
        snprintf(out, cap, "%.0f ms interval", series_interval_s * 1000);
    else
        snprintf(out, cap, "%.3g s interval", series_interval_s);
}

/* One clustered bar panel of data file `file` with the given data columns
 * (1-based in the file; column 1 is the run). A panel without a single bar
 * says so instead of plotting nothing, which gnuplot refuses. */
static void gp_bars(FILE *f, const char *file, const size_t *cols, size_t n, const char *title,
                    const char *ylabel, bool empty)
{
    fprintf(f, "set title ");
    gp_label(f, title);
    fprintf(f, "\nset ylabel ");
    gp_label(f, ylabel);
    fprintf(f, "\n");
    if (empty) {
        fprintf(f,
                "set label 99 \"none in any run\" at graph 0.5, graph 0.5 center\n"
                "plot \"%s\" using (NaN):xtic(1) notitle, 1 with lines lc rgb \"white\" "
                "notitle\nunset label 99\n",
                file);
        return;
    }
    fprintf(f, "plot ");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\"%s\" using %zu%s lt %zu title columnheader(%zu)",
                i > 0 ? ", \\\n     " : "", file, cols[i], i == 0 ? ":xtic(1)" : "", cols[i] - 1,
                cols[i]);
    fprintf(f, "\n");
}

/* The fault of run i: the first of its scenarios that ran one. Its start
 * and end on the timeline's clock (seconds since the first run began). */
static const json_t *run_fault(int i, double *from, double *to)
{
    for (int k = 0; k < runs[i].count; k++) {
        const json_t *j = runs[i].scen[k].json;
        const char *cmd = jstr(j, "fault.command");

        if (cmd[0] == '\0' || jnum(j, "fault.started_s") < 0)
            continue;
        *from = jnum(j, "started_unix") - timeline_t0 + jnum(j, "fault.started_s");
        *to = jnum(j, "started_unix") - timeline_t0 + jnum(j, "fault.ended_s");
        return json_object_get(j, "fault");
    }
    return NULL;
}

/* One panel per fault run: its throughput (or latency) from a little
 * before the fault to a few seconds after it, the fault shaded and named.
 * Runs without a fault are flat lines that say nothing over time, so they
 * are not drawn; their figures are in the tables. */
static void gp_fault_panels(FILE *f, const char *out, const char *what, int nfault, bool latency)
{
    fprintf(f,
            "\nset terminal pngcairo size 1200,%d font \",10\" noenhanced\nset output \"%s\"\n"
            "set multiplot layout %d,1 title \"%s\"\n",
            nfault > 0 ? 60 + nfault * 260 : 300, out, nfault > 0 ? nfault : 1, what);
    if (nfault == 0)
        fprintf(f, "set label 99 \"no run had a fault\" at graph 0.5, graph 0.5 center\n"
                   "plot 1 with lines lc rgb \"white\" notitle\nunset label 99\n");
    for (int i = 0; i < run_count; i++) {
        double from = 0, to = 0;
        const json_t *fault = run_fault(i, &from, &to);
        char title[512];

        if (fault == NULL)
            continue;
        /* A long command (MariaDB's restart) is cut: the run's table has it whole. */
        snprintf(title, sizeof(title), "run %d (%s): fault %.90s%s", runs[i].number, runs[i].label,
                 jstr(fault, "command"), strlen(jstr(fault, "command")) > 90 ? "..." : "");
        fprintf(f, "set title ");
        gp_label(f, title);
        fprintf(f,
                "\nset object 1 rect from %.3f, graph 0 to %.3f, graph 1 fc rgb \"#d55e00\" "
                "fs transparent solid 0.18 noborder behind\n"
                "set xrange [-2:%.1f]\n",
                0.0, to - from > 0.05 ? to - from : 0.05, to - from + 6);
        if (latency)
            fprintf(f,
                    "plot \"timeline.dat\" index %d using ($1-%.3f):4 with linespoints lt 1 "
                    "title \"p99\", \"timeline.dat\" index %d using ($1-%.3f):3 with "
                    "linespoints lt 3 title \"p50\"\n",
                    i, from, i, from);
        else
            fprintf(f,
                    "plot \"timeline.dat\" index %d using ($1-%.3f):2 with linespoints lt 1 "
                    "title \"requests/s\"\n",
                    i, from);
        fprintf(f, "unset object 1\n");
    }
    fprintf(f, "unset multiplot\n");
}

static void write_fault_lines(FILE *f, const char *every)
{
    int nfault = 0;

    for (int i = 0; i < run_count; i++) {
        double from, to;

        nfault += run_fault(i, &from, &to) != NULL;
    }
    fprintf(f, "\nset style data lines\nunset logscale y\nset xtics norotate offset 0,0 font "
               "\",10\"\nset key inside right top\nset lmargin at screen 0.07\n"
               "set rmargin at screen 0.97\n"
               "set xlabel \"seconds from the fault's start (shaded: while the fault ran)\"\n");
    fprintf(f, "set yrange [0:*]\nset ylabel \"requests/s\"\n");
    {
        char what[160];

        snprintf(what, sizeof(what), "Throughput of the load requests around each fault, per %s",
                 every);
        gp_fault_panels(f, "throughput.png", what, nfault, false);
        snprintf(what, sizeof(what), "Latency of the load requests around each fault, per %s",
                 every);
        fprintf(f, "set logscale y\nset yrange [*:*]\nset ylabel \"ms (log)\"\n");
        gp_fault_panels(f, "latency.png", what, nfault, true);
    }
}

static int write_gnuplot(const char *dir, const struct run_sum *sums)
{
    FILE *f = open_out(dir, "charts.gp");
    /* One hue per layer or kind, told apart on a projector: Okabe-Ito's
     * colour-blind safe set, then Tol's dark ones; no two of one family. */
    static const char *const colours[] = {"#0072b2", "#e69f00", "#009e73", "#cc79a7",
                                          "#56b4e9", "#d55e00", "#332288", "#999999",
                                          "#000000", "#882255", "#ddcc77", "#117733"};
    const size_t ncol = sizeof(colours) / sizeof(colours[0]);
    char every[64];
    size_t cols[LAYER_COLS + DAMAGE_COLS];
    int panels = 0;

    if (f == NULL)
        return -1;
    interval_words(every, sizeof(every));
    fprintf(f, "# Written by ticketd-report; run in this folder: gnuplot charts.gp\n");
    fprintf(f, "set datafile separator \"\\t\"\nset datafile missing \"NaN\"\n");
    /* Bars: a colour per kind (damage) or per layer. */
    for (size_t i = 0; i < ncol; i++)
        fprintf(f, "set linetype %zu lc rgb \"%s\" lw 2 pt 7 ps 0.6\n", i + 1, colours[i]);
    fprintf(f, "set grid ytics\nset key outside right top\nset border 3\nset tics nomirror\n");

    /* Bars: one group per run, one bar per kind, log scale. Labels are
     * right-aligned at their group's centre, so a slanted label ends under
     * its bars. */
    fprintf(f, "\nset style data histograms\nset style histogram clustered gap 1\n"
               "set style fill solid 0.85 border -1\nset boxwidth 0.9\nset logscale y\n"
               "set yrange [0.8:*]\nset xtics rotate by 35 right offset 0.5,0 font \",9\"\n");
    /* Every panel shows every run, also those after the last bar. */
    fprintf(f, "set xrange [-0.6:%.1f]\n", run_count - 0.4);

    /* Damage: small multiples, one panel per unit, never one axis for
     * seats and points together. */
    for (size_t u = 0; u < DAMAGE_UNITS; u++)
        panels++;
    fprintf(f,
            "\nset terminal pngcairo size 1200,%d font \",10\" noenhanced\n"
            "set output \"damage.png\"\n"
            "set multiplot layout %d,1 title \"Damage per run, each kind in its own unit "
            "(log scale; no bar: none)\"\n"
            /* The key outside each panel is as wide as its longest name:
             * fixed margins keep the panels' plot areas one above the other. */
            "set lmargin at screen 0.07\nset rmargin at screen 0.70\n",
            panels * 330, panels);
    for (size_t u = 0; u < DAMAGE_UNITS; u++) {
        size_t n = 0;
        long long total = 0;
        char title[128], ylabel[64];

        for (size_t d = 0; d + 1 < DAMAGE_COLS; d++) {
            if (strcmp(damage_cols[d].unit, damage_units[u]) != 0)
                continue;
            cols[n++] = d + 2;
            for (int i = 0; i < run_count; i++)
                total += sums[i].damage[d];
        }
        snprintf(title, sizeof(title), "Damage in %s", damage_units[u]);
        snprintf(ylabel, sizeof(ylabel), "%s (log)", damage_units[u]);
        gp_bars(f, "damage.dat", cols, n, title, ylabel, total == 0);
    }
    fprintf(f, "unset multiplot\nunset lmargin\nunset rmargin\n");

    /* Catches: answers (orders and callbacks) in one panel, event copies
     * (consumer-dedup) in another. */
    fprintf(f,
            "\nset terminal pngcairo size 1200,990 font \",10\" noenhanced\n"
            "set output \"layers.png\"\n"
            "set multiplot layout 2,1 title \"Who caught the duplicates, every layer (log scale; "
            "no bar: none)\"\n"
            "set lmargin at screen 0.07\nset rmargin at screen 0.70\n");
    {
        size_t n = 0;
        long long ev = 0;
        size_t cd = layer_index("consumer-dedup");
        long long answers = 0;

        for (size_t l = 0; l < LAYER_COLS; l++) {
            if (l == cd)
                continue;
            cols[n++] = l + 2;
            for (int i = 0; i < run_count; i++)
                answers += sums[i].caught[l];
        }
        for (int i = 0; i < run_count; i++)
            ev += sums[i].caught[cd];
        gp_bars(f, "layers.dat", cols, n,
                "Answers: orders by Idempotency-Layer; callbacks replayed (callback-dedup) "
                "or DUPLICATE_PAYMENT (state-machine)",
                "answers (log)", answers == 0);
        cols[0] = cd + 2;
        gp_bars(f, "layers.dat", cols, 1,
                "Event copies skipped by the consumers' dedup row (copies redelivered x 2 "
                "consumer groups)",
                "event copies (log)", ev == 0);
    }
    fprintf(f, "unset multiplot\nunset lmargin\nunset rmargin\n");

    write_fault_lines(f, every);
    return fclose(f) == 0 ? 0 : -1;
}

/* ---- main --------------------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out, "usage: ticketd-report --runs FILE --out DIR [--meta TEXT]...\n"
                 "Writes DIR/report.md, damage.dat, layers.dat, timeline.dat and charts.gp\n"
                 "from the ticketd-load --json files FILE lists (see the top of report.c).\n");
}

int main(int argc, char **argv)
{
    const char *runs_path = NULL;
    const char *dir = NULL;
    const char *meta[META_MAX];
    int meta_count = 0;
    struct run_sum *sums = NULL;
    struct sbuf *verdicts = NULL;
    FILE *f = NULL;
    int worst = 0;
    int rc = 1;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            runs_path = argv[++i];
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            dir = argv[++i];
        } else if (strcmp(argv[i], "--meta") == 0 && i + 1 < argc && meta_count < META_MAX) {
            meta[meta_count++] = argv[++i];
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 1;
        }
    }
    if (runs_path == NULL || dir == NULL) {
        usage(stderr);
        return 1;
    }
    if (runs_read(runs_path, dir) != 0)
        goto out;
    if (run_count == 0) {
        fprintf(stderr, "ticketd-report: %s lists no runs\n", runs_path);
        goto out;
    }
    sums = xcalloc((size_t)run_count, sizeof(*sums));
    verdicts = xcalloc((size_t)run_count, sizeof(*verdicts));
    for (int i = 0; i < run_count; i++) {
        int v;

        run_sum(&runs[i], &sums[i]);
        v = run_verdict(&runs[i], &sums[i], &verdicts[i]);
        if (v == 2 || (v == 1 && worst == 0))
            worst = v;
    }

    for (int i = 0; i < run_count && series_interval_s == 0; i++)
        for (int k = 0; k < runs[i].count; k++)
            if (jnum(runs[i].scen[k].json, "series.interval_s") > 0) {
                series_interval_s = jnum(runs[i].scen[k].json, "series.interval_s");
                break;
            }
    f = open_out(dir, "report.md");
    if (f == NULL)
        goto out;
    fprintf(f, "# ticketd replay lab\n\n");
    for (int i = 0; i < meta_count; i++)
        fprintf(f, "%s  \n", meta[i]);
    write_summary(f, sums);
    fprintf(f, "\n![Damage per run](damage.png)\n\n![Who caught the duplicates](layers.png)\n\n"
               "![Throughput over time](throughput.png)\n\n![Latency over time](latency.png)\n");
    fprintf(f, "\nDamage is what the guarantees forbid, counted by ticketd-load from the answers "
               "and from what the service reports afterwards (session stock, `GET /api/v1/me`, "
               "`GET /api/v1/admin/audit`); the database is emptied before each run, so the "
               "audit sees that run alone. An answer the contract does not allow (a copy of a "
               "key refused while the key has its order, a retry of a completed key not given "
               "it, a 503 without Retry-After) is damage too, counted in answers. Each kind of "
               "damage keeps its own unit. \"Replays\" are `201` answers with "
               "`Idempotent-Replayed: true`, \"rejections\" 4xx answers, each by the "
               "`Idempotency-Layer` that produced it. ticketd-load retries as a client does: "
               "after no answer or a 5xx it sends the same request again (after Retry-After, "
               "on the next instance after no answer); the last answer is the one judged, and "
               "\"retried after\" lists what the earlier attempts got. Catches are counted for "
               "every layer: besides the order layers, `check-then-insert` (the look-up before "
               "the insert when the unique index is gone), `callback-dedup` (callbacks "
               "replayed), `state-machine` (a second payment of a paid order answered "
               "DUPLICATE_PAYMENT instead of paying it again) and `consumer-dedup` (event "
               "copies skipped: the copies redeliver.sh sent times the 2 consumer groups, "
               "counted when the dedup row by business key was on and no points were "
               "credited twice; ticketd-load does not see the consumers themselves).\n");
    {
        char every[64];

        interval_words(every, sizeof(every));
        fprintf(f,
                "\nThe throughput and latency charts are sampled per %s (ticketd-load "
                "--interval).\n",
                every);
    }
    for (int i = 0; i < run_count; i++)
        write_run(f, &runs[i], &sums[i], sb_str(&verdicts[i]));
    if (fclose(f) != 0) {
        f = NULL;
        goto out;
    }
    f = NULL;
    if (write_bars(dir, "damage.dat", sums, true) != 0 ||
        write_bars(dir, "layers.dat", sums, false) != 0 || write_timeline(dir) != 0 ||
        write_gnuplot(dir, sums) != 0)
        goto out;

    for (int i = 0; i < run_count; i++)
        printf("  run %2d  %-58s %s\n", runs[i].number, runs[i].label, sb_str(&verdicts[i]));
    rc = worst;
out:
    if (f != NULL)
        fclose(f);
    if (verdicts != NULL)
        for (int i = 0; i < run_count; i++)
            free(verdicts[i].p);
    free(verdicts);
    free(sums);
    for (int i = 0; i < run_count; i++) {
        for (int k = 0; k < runs[i].count; k++) {
            free(runs[i].scen[k].name);
            free(runs[i].scen[k].command);
            free(runs[i].scen[k].json_path);
            free(runs[i].scen[k].json_full);
            json_decref(runs[i].scen[k].json);
        }
        free(runs[i].label);
        free(runs[i].off);
        free(runs[i].database);
        free(runs[i].purpose);
    }
    return rc;
}
