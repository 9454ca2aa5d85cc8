/* deadletters.c - listing and re-driving dead letters (deadletters.h). */
#include "deadletters.h"

#include "config.h"
#include "consume.h"
#include "err.h"
#include "event_payload.h"
#include "log.h"
#include "store.h"
#include "store_events.h"
#include "util.h"

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE 200 /* letters read per query */

static void usage(FILE *f)
{
    fprintf(f, "usage: ticketd dead-letters list [--config FILE] [--consumer NAME] [--json]\n"
               "       ticketd dead-letters replay [--config FILE] (--id N | --all) "
               "[--consumer NAME]\n"
               "\n"
               "Events a consumer group gave up on. list prints the open letters;\n"
               "replay applies one (--id N) or all of them again through the consumers'\n"
               "own code, exactly once per business key, and exits 1 while one still fails.\n"
               "\n"
               "  --config FILE    KEY=VALUE settings (the environment wins over them)\n"
               "  --consumer NAME  only that group's letters: points or ticketing\n"
               "  --json           list: one JSON object per line\n");
}

struct opts {
    const char *config;
    const char *consumer; /* NULL: every consumer */
    bool json;
    int64_t id;
    bool all;
};

/* ---- list ---- */

struct lister {
    bool json;
    int64_t last_id;
    int rows;
};

static int print_letter(const struct dead_letter *dl, void *ctx)
{
    struct lister *l = ctx;
    l->last_id = dl->id;
    l->rows++;
    if (!l->json) {
        printf("%-6lld %-10s %-32s %-9lld %-10lld %-20s %s\n", (long long)dl->id, dl->consumer,
               dl->biz_key, (long long)dl->outbox_id, (long long)dl->deliveries, dl->created_at,
               dl->reason);
        return 0;
    }
    json_t *j =
        json_pack("{sI ss ss sI sI ss ss}", "id", (json_int_t)dl->id, "consumer", dl->consumer,
                  "biz_key", dl->biz_key, "outbox_id", (json_int_t)dl->outbox_id, "deliveries",
                  (json_int_t)dl->deliveries, "reason", dl->reason, "created_at", dl->created_at);
    char *s = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
    if (s != NULL)
        printf("%s\n", s);
    free(s);
    json_decref(j);
    return 0;
}

static int cmd_list(const struct opts *o)
{
    struct lister l = {.json = o->json};
    int rows;
    if (!o->json)
        printf("%-6s %-10s %-32s %-9s %-10s %-20s %s\n", "ID", "CONSUMER", "BUSINESS KEY",
               "OUTBOX ID", "DELIVERIES", "CREATED AT", "REASON");
    do {
        rows = l.rows;
        int rc = store_dead_letters_open(o->consumer, l.last_id, PAGE, print_letter, &l);
        if (rc != TD_OK) {
            fprintf(stderr, "ticketd: cannot read the dead letters: %s\n", td_strerror(rc));
            return 1;
        }
    } while (l.rows - rows == PAGE);
    if (!o->json && l.rows == 0)
        printf("(no open dead letters)\n");
    return 0;
}

/* ---- replay ---- */

enum result { APPLIED, ALREADY, FAILING };

/* The event a letter was about, read again from the outbox (the database
 * has the last word; the dead-letter stream is only a copy). NULL when it
 * can be re-driven, else why not (static text, or err). */
static const char *letter_event(const struct dead_letter *dl, const struct consume_group *g,
                                struct outbox_event *ev, struct paid_event *pe, char *err,
                                size_t errlen)
{
    const char *why;
    if (g == NULL)
        return "no consumer of that name";
    int rc = store_outbox_get(dl->outbox_id, ev);
    if (rc == TD_ENOTFOUND)
        return "its outbox event is gone";
    if (rc != TD_OK) {
        snprintf(err, errlen, "cannot read its outbox event: %s", td_strerror(rc));
        return err;
    }
    if (strcmp(ev->event_type, EVENT_ORDER_PAID) != 0)
        return "its outbox event is not one the consumer acts on";
    if (!event_paid_parse(ev->biz_key, ev->payload, strlen(ev->payload), pe, &why))
        return why;
    char *key = consume_dedup_key(g, ev->biz_key);
    bool same = strcmp(key, dl->biz_key) == 0;
    free(key);
    return same ? NULL : "its business key is not its outbox event's";
}

/* Re-drives one open letter and prints its line. */
static enum result redrive(const struct config *cfg, const struct dead_letter *dl,
                           struct outbox_event *ev)
{
    const struct consume_group *g = consume_group_find(dl->consumer);
    struct paid_event pe;
    char err[96];
    enum result res = FAILING;

    printf("dead letter %lld (%s): ", (long long)dl->id, dl->biz_key);
    const char *why = letter_event(dl, g, ev, &pe, err, sizeof err);
    if (why == NULL) {
        /* The letter's own business key: its exactly-once rests on it. */
        int rc = consume_apply(g, &pe, dl->biz_key, dl->id, cfg->tx_retries);
        if (rc == TD_OK) {
            res = APPLIED;
        } else if (rc == TD_EDUP) {
            res = ALREADY;
        } else if ((why = consume_unfit_reason(rc)) == NULL) {
            snprintf(err, sizeof err, "%s", td_strerror(rc));
            why = err;
        }
    }
    if (res == APPLIED)
        printf("applied\n");
    else if (res == ALREADY)
        printf("already applied\n");
    else
        printf("still failing: %s\n", why);
    fflush(stdout);
    return res;
}

struct page {
    struct dead_letter *dl;
    int n;
};

static int collect(const struct dead_letter *dl, void *ctx)
{
    struct page *p = ctx;
    p->dl[p->n++] = *dl;
    return 0;
}

struct tally {
    int applied, already, failing;
};

/* --id N: the letter as the first page (none when it was re-driven
 * before, which counts as already applied). Returns the exit status on
 * an error, else 0. */
static int page_of_id(const struct opts *o, struct page *p, struct tally *t)
{
    struct dead_letter *dl = &p->dl[0];
    int rc = store_dead_letter_get(o->id, dl);
    if (rc != TD_OK) {
        fprintf(stderr, "ticketd: dead letter %lld: %s\n", (long long)o->id,
                rc == TD_ENOTFOUND ? "no such dead letter" : td_strerror(rc));
        return 1;
    }
    if (o->consumer != NULL && strcmp(o->consumer, dl->consumer) != 0) {
        fprintf(stderr, "ticketd: dead letter %lld belongs to %s, not %s\n", (long long)o->id,
                dl->consumer, o->consumer);
        return 2;
    }
    if (dl->replayed_at[0] != '\0') {
        printf("dead letter %lld (%s): already applied (re-driven %s: %s)\n", (long long)o->id,
               dl->biz_key, dl->replayed_at, dl->replay_result);
        t->already++;
    } else {
        p->n = 1;
    }
    return 0;
}

/* Re-drives a page of letters; returns the last id. */
static int64_t redrive_page(const struct config *cfg, const struct page *p, struct outbox_event *ev,
                            struct tally *t, int64_t after)
{
    for (int i = 0; i < p->n; i++) {
        switch (redrive(cfg, &p->dl[i], ev)) {
        case APPLIED:
            t->applied++;
            break;
        case ALREADY:
            t->already++;
            break;
        case FAILING:
            t->failing++;
            break;
        }
        after = p->dl[i].id;
    }
    return after;
}

static int cmd_replay(const struct config *cfg, const struct opts *o)
{
    struct outbox_event *ev = xmalloc(sizeof *ev);
    struct page p = {xcalloc(PAGE, sizeof *p.dl), 0};
    struct tally t = {0};
    int64_t after = 0;
    int status = o->id != 0 ? page_of_id(o, &p, &t) : 0;
    while (status == 0) {
        after = redrive_page(cfg, &p, ev, &t, after);
        if (!o->all || (p.n < PAGE && after != 0))
            break;
        /* The next page: still-failing letters stay open, so read on
         * after the last id rather than from the start. */
        p.n = 0;
        int rc = store_dead_letters_open(o->consumer, after, PAGE, collect, &p);
        if (rc != TD_OK) {
            fprintf(stderr, "ticketd: cannot read the dead letters: %s\n", td_strerror(rc));
            status = 1;
        } else if (p.n == 0) {
            break;
        }
    }
    if (status == 0) {
        printf("%d applied, %d already applied, %d still failing\n", t.applied, t.already,
               t.failing);
        status = t.failing > 0 ? 1 : 0;
    }
    free(p.dl);
    free(ev);
    return status;
}

/* ---- the command ---- */

static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"consumer", required_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},
        {"id", required_argument, NULL, 'i'},
        {"all", no_argument, NULL, 'a'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "c:n:ji:ah", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            o->config = optarg;
            break;
        case 'n':
            if (consume_group_find(optarg) == NULL) {
                fprintf(stderr, "ticketd: --consumer must be %s or %s\n", consume_groups[0].name,
                        consume_groups[1].name);
                return 2;
            }
            o->consumer = optarg;
            break;
        case 'j':
            o->json = true;
            break;
        case 'i':
            if (!parse_i64(optarg, 1, INT64_MAX, &o->id)) {
                fprintf(stderr, "ticketd: --id must be a dead letter's id\n");
                return 2;
            }
            break;
        case 'a':
            o->all = true;
            break;
        case 'h':
            usage(stdout);
            return -1;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    return 0;
}

int deadletters_main(int argc, char **argv)
{
    struct opts o = {0};
    struct config cfg;
    enum log_level level;
    int rc;

    log_to_stderr();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    bool list = strcmp(argv[1], "list") == 0, replay = strcmp(argv[1], "replay") == 0;
    if (!list && !replay) {
        fprintf(stderr, "ticketd: dead-letters: unknown subcommand '%s' (choices: list, replay)\n",
                argv[1]);
        usage(stderr);
        return 2;
    }
    rc = parse(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (list && (o.id != 0 || o.all)) {
        fprintf(stderr, "ticketd: list takes no --id or --all\n");
        return 2;
    }
    if (replay && (o.json || (o.id != 0) == o.all)) {
        fprintf(stderr, "ticketd: replay needs either --id N or --all (and no --json)\n");
        return 2;
    }
    if (config_load(&cfg, o.config) != TD_OK) {
        config_cleanup(&cfg);
        return 2;
    }
    if (log_parse_level(cfg.log_level, &level) == TD_OK)
        log_set_level(level);
    if (store_init(&cfg) != TD_OK) {
        fprintf(stderr, "ticketd: cannot initialise the database client library\n");
        rc = 1;
    } else {
        rc = list ? cmd_list(&o) : cmd_replay(&cfg, &o);
        store_thread_release();
        store_cleanup();
    }
    config_cleanup(&cfg);
    return rc;
}
