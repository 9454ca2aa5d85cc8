#include "load_engine.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ticketd's answers are small; a body beyond this is cut (and still counted)
 * so that a misbehaving server cannot grow the tool's memory. */
#define LOAD_RESP_MAX (256 * 1024)

struct load_engine {
    struct load_engine_config cfg;
    CURLM *multi;
    CURL *control; /* easy handle of load_engine_call(), keeps its connection */
    CURL **idle;   /* easy handles ready for reuse */
    int idle_count;
    int idle_cap;
    long long started;
    int rr;
    bool stopped;
    struct load_stats *stats;
    /* Requests waiting for their start: a delayed copy or a retry. They
     * hold their slot meanwhile. */
    struct load_req **pend;
    int pend_count;
    int pend_cap;
};

/* Load requests answered over HTTP, every attempt, in every engine of the
 * process: the clock a --fault-after is read on (load_answers). */
static atomic_ullong answers_total;

uint64_t load_answers(void)
{
    return (uint64_t)atomic_load(&answers_total);
}

/* Set once before any engine runs (load_engine_observe); read after. */
static struct load_observer observer;

void load_engine_observe(const struct load_observer *o)
{
    observer = o != NULL ? *o : (struct load_observer){0};
}

/* Set from a signal handler: every engine stops starting requests. */
static volatile sig_atomic_t engine_interrupted;

void load_engine_interrupt(void)
{
    engine_interrupted = 1;
}

void *load_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n == 0 ? 1 : n, size == 0 ? 1 : size);

    if (p == NULL) {
        fprintf(stderr, "ticketd-load: out of memory\n");
        abort();
    }
    return p;
}

char *load_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = load_xcalloc(1, n);

    memcpy(p, s, n);
    return p;
}

double load_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

long long load_unix_now(void)
{
    return (long long)time(NULL);
}

struct load_stats *load_stats_new(void)
{
    return load_xcalloc(1, sizeof(struct load_stats));
}

void load_stats_free(struct load_stats *st)
{
    if (st == NULL)
        return;
    free(st->ticks);
    free(st);
}

/* The tick of second idx, growing the series as the run goes on; NULL once
 * past LOAD_TICKS_MAX. */
static struct load_tick *tick_at(struct load_stats *st, size_t idx)
{
    if (idx >= LOAD_TICKS_MAX) {
        st->ticks_truncated = true;
        return NULL;
    }
    if (idx >= st->tick_count) {
        struct load_tick *p = realloc(st->ticks, (idx + 1) * sizeof(*p));

        if (p == NULL) {
            fprintf(stderr, "ticketd-load: out of memory\n");
            abort();
        }
        memset(p + st->tick_count, 0, (idx + 1 - st->tick_count) * sizeof(*p));
        st->ticks = p;
        st->tick_count = idx + 1;
    }
    return &st->ticks[idx];
}

static void tick_record(struct load_stats *st, const struct load_req *r)
{
    double at = (r->t_end - st->t0) / st->tick_s;
    struct load_tick *t = tick_at(st, at > 0 ? (size_t)at : 0);

    if (t == NULL)
        return;
    t->done++;
    if (r->status == 0 || r->status >= 500)
        t->errors++;
    else if (r->status >= 400)
        t->rejections++;
    if (r->status != 0)
        hist_small_add(&t->latency, r->latency_us);
    if (r->kind == LOAD_ORDER && r->status == 201) {
        if (r->replayed)
            t->replays++;
        else
            t->created++;
    }
}

/* --orders-out: the order number of an order's final 201, so that a
 * caller can check each against the database. One fprintf per line: stdio
 * locks the stream, so the engines of `mixed` may share it. */
static void note_order(struct load_engine *e, const struct load_req *r)
{
    if (r->kind != LOAD_ORDER || r->status != 201 || r->json == NULL)
        return;
    json_t *no = json_object_get(r->json, "order_no");
    if (json_is_string(no))
        fprintf(e->cfg.orders_out, "%s\n", json_string_value(no));
}

struct load_engine *load_engine_new(const struct load_engine_config *cfg)
{
    struct load_engine *e = load_xcalloc(1, sizeof(*e));

    e->cfg = *cfg;
    e->multi = curl_multi_init();
    e->control = curl_easy_init();
    e->stats = load_stats_new();
    e->stats->t0 = cfg->series_t0 > 0 ? cfg->series_t0 : load_now();
    e->stats->tick_s = cfg->series_tick_s > 0 ? cfg->series_tick_s : LOAD_TICK_S;
    if (e->multi == NULL || e->control == NULL) {
        load_engine_free(e);
        return NULL;
    }
    return e;
}

void load_engine_free(struct load_engine *e)
{
    if (e == NULL)
        return;
    for (int i = 0; i < e->idle_count; i++)
        curl_easy_cleanup(e->idle[i]);
    free(e->idle);
    for (int i = 0; i < e->pend_count; i++)
        load_req_free(e->pend[i]);
    free(e->pend);
    if (e->control != NULL)
        curl_easy_cleanup(e->control);
    if (e->multi != NULL)
        curl_multi_cleanup(e->multi);
    load_stats_free(e->stats);
    free(e);
}

struct load_req *load_req_new(enum load_kind kind, const char *method, const char *fmt, ...)
{
    struct load_req *r = load_xcalloc(1, sizeof(*r));
    va_list ap;

    r->kind = kind;
    r->method = method;
    r->target = -1;
    r->retry_after_s = -1;
    va_start(ap, fmt);
    int n = vasprintf(&r->path, fmt, ap);
    va_end(ap);
    if (n < 0) {
        fprintf(stderr, "ticketd-load: out of memory\n");
        abort();
    }
    return r;
}

void load_req_free(struct load_req *r)
{
    if (r == NULL)
        return;
    free(r->path);
    free(r->body);
    curl_slist_free_all(r->headers);
    json_decref(r->json);
    free(r->resp);
    free(r);
}

void load_req_header(struct load_req *r, const char *fmt, ...)
{
    char line[1024];
    struct curl_slist *next;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    next = curl_slist_append(r->headers, line);
    if (next == NULL) {
        fprintf(stderr, "ticketd-load: out of memory\n");
        abort();
    }
    r->headers = next;
}

void load_req_raw(struct load_req *r, const char *body, size_t len)
{
    free(r->body);
    r->body = load_xcalloc(1, len + 1);
    memcpy(r->body, body, len);
    r->body_len = len;
    load_req_header(r, "Content-Type: application/json");
}

void load_req_json(struct load_req *r, const json_t *obj)
{
    char *s = json_dumps(obj, JSON_COMPACT);

    if (s == NULL) {
        fprintf(stderr, "ticketd-load: out of memory\n");
        abort();
    }
    load_req_raw(r, s, strlen(s));
    free(s);
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *userp)
{
    struct load_req *r = userp;
    size_t n = size * nmemb;
    size_t room;

    if (r->resp_len >= LOAD_RESP_MAX)
        return n;
    room = LOAD_RESP_MAX - r->resp_len;
    if (n > room)
        n = room;
    if (r->resp_len + n + 1 > r->resp_cap) {
        size_t cap = r->resp_cap == 0 ? 1024 : r->resp_cap;
        char *p;

        while (cap < r->resp_len + n + 1)
            cap *= 2;
        p = realloc(r->resp, cap);
        if (p == NULL) {
            fprintf(stderr, "ticketd-load: out of memory\n");
            abort();
        }
        r->resp = p;
        r->resp_cap = cap;
    }
    memcpy(r->resp + r->resp_len, data, n);
    r->resp_len += n;
    r->resp[r->resp_len] = '\0';
    return size * nmemb;
}

/* Copies the value of header line "Name: value\r\n" into out if the name
 * matches, trimmed. */
static bool header_value(const char *line, size_t len, const char *name, char *out, size_t outlen)
{
    size_t nlen = strlen(name);
    size_t start;
    size_t end;
    size_t n;

    if (len <= nlen || line[nlen] != ':' || strncasecmp(line, name, nlen) != 0)
        return false;
    start = nlen + 1;
    while (start < len && (line[start] == ' ' || line[start] == '\t'))
        start++;
    end = len;
    while (end > start && (line[end - 1] == '\r' || line[end - 1] == '\n' || line[end - 1] == ' ' ||
                           line[end - 1] == '\t'))
        end--;
    n = end - start;
    if (n >= outlen)
        n = outlen - 1;
    memcpy(out, line + start, n);
    out[n] = '\0';
    return true;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *userp)
{
    struct load_req *r = userp;
    size_t n = size * nmemb;
    char flag[16];

    /* A new status line starts a new answer (after a 100 Continue). */
    if (n > 5 && strncmp(data, "HTTP/", 5) == 0) {
        r->layer[0] = '\0';
        r->replayed = false;
        r->retry_after_s = -1;
        return n;
    }
    if (header_value(data, n, "Idempotency-Layer", r->layer, sizeof(r->layer)))
        return n;
    if (header_value(data, n, "Retry-After", flag, sizeof(flag))) {
        char *end = NULL;
        long secs = strtol(flag, &end, 10);

        /* Seconds only; an HTTP date counts as "later" (1 s). */
        r->retry_after_s = end != flag && *end == '\0' && secs >= 0 ? secs : 1;
        return n;
    }
    if (header_value(data, n, "Idempotent-Replayed", flag, sizeof(flag)))
        r->replayed = strcasecmp(flag, "true") == 0 || strcmp(flag, "?1") == 0;
    return n;
}

static const char *target_of(struct load_engine *e, struct load_req *r)
{
    if (r->attempts == 0)
        r->pinned = r->target >= 0 && r->target < e->cfg.target_count && !r->first_choice;
    if (r->target < 0 || r->target >= e->cfg.target_count) {
        r->target = e->rr % e->cfg.target_count;
        e->rr = (e->rr + 1) % e->cfg.target_count;
    }
    return e->cfg.targets[r->target];
}

static int easy_setup(struct load_engine *e, CURL *h, struct load_req *r)
{
    char *url;

    /* Any length, as the path: libcurl keeps a copy. */
    if (asprintf(&url, "%s%s", target_of(e, r), r->path) < 0) {
        fprintf(stderr, "ticketd-load: out of memory\n");
        abort();
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    free(url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, e->cfg.timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, e->cfg.timeout_ms);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_PRIVATE, r);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r->error);
    curl_easy_setopt(h, CURLOPT_VERBOSE, e->cfg.verbose > 1 ? 1L : 0L);
    /* Never wait for 100 Continue: every body here is small. */
    if (!r->expect_off) {
        load_req_header(r, "Expect:");
        r->expect_off = true;
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, r->headers);
    if (strcmp(r->method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body != NULL ? r->body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)r->body_len);
    } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    r->easy = h;
    return 0;
}

static bool content_is_json(CURL *h)
{
    char *ct = NULL;

    if (curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct) != CURLE_OK || ct == NULL)
        return false;
    return strncasecmp(ct, "application/json", 16) == 0 ||
           strncasecmp(ct, "application/problem+json", 24) == 0;
}

/* Fills the answer fields of r from its transfer. */
static void answer_fill(struct load_req *r, CURL *h, CURLcode res)
{
    const char *s;

    r->t_end = load_now();
    r->latency_us = (uint64_t)((r->t_end - r->t_start) * 1e6);
    if (res != CURLE_OK) {
        r->status = 0;
        if (r->error[0] == '\0')
            snprintf(r->error, sizeof(r->error), "%s", curl_easy_strerror(res));
        return;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    if (r->resp_len > 0 && content_is_json(h))
        r->json = json_loadb(r->resp, r->resp_len, 0, NULL);
    if (r->json == NULL)
        return;
    if (r->status >= 400) {
        s = json_string_value(json_object_get(r->json, "code"));
        if (s != NULL)
            snprintf(r->code, sizeof(r->code), "%s", s);
    } else if (r->kind == LOAD_CALLBACK) {
        /* A callback's answer is 200 whatever happened; what matters is
         * the outcome and whether it was a replay of the first one. */
        s = json_string_value(json_object_get(r->json, "outcome"));
        if (s != NULL)
            snprintf(r->code, sizeof(r->code), "%s", s);
        if (json_is_true(json_object_get(r->json, "replayed")))
            r->replayed = true;
    }
}

static void stats_record(struct load_stats *st, const struct load_req *r, bool retried)
{
    struct load_answer *a = NULL;

    st->requests[r->kind]++;
    if (r->kind != LOAD_CONTROL)
        tick_record(st, r);
    if (r->kind != LOAD_CONTROL && r->status != 0)
        atomic_fetch_add(&answers_total, 1);
    if (retried)
        st->retries[r->kind]++;
    else if (r->uncertain)
        st->unanswered[r->kind]++;
    if (r->status == 0) {
        st->transport_errors[r->kind]++;
        if (st->first_transport_error[0] == '\0')
            snprintf(st->first_transport_error, sizeof(st->first_transport_error), "%s %s: %s",
                     r->method, r->path, r->error);
    } else {
        hist_add(&st->latency[r->kind], r->latency_us);
        if (r->kind != LOAD_CONTROL)
            hist_add(&st->latency_load, r->latency_us);
        if (r->status >= 500)
            st->server_errors[r->kind]++;
        if (r->kind == LOAD_ORDER && r->status == 201 && !r->replayed)
            st->orders_created++;
    }
    for (unsigned i = 0; i < st->answer_count; i++) {
        struct load_answer *x = &st->answers[i];

        if (x->kind == r->kind && x->status == r->status && x->replayed == r->replayed &&
            x->retried == retried && strcmp(x->code, r->code) == 0 &&
            strcmp(x->layer, r->layer) == 0) {
            a = x;
            break;
        }
    }
    if (a == NULL) {
        if (st->answer_count == LOAD_ANSWERS_MAX) {
            st->answers_other++;
            return;
        }
        a = &st->answers[st->answer_count++];
        a->kind = r->kind;
        a->status = r->status;
        a->replayed = r->replayed;
        a->retried = retried;
        snprintf(a->code, sizeof(a->code), "%s", r->code);
        snprintf(a->layer, sizeof(a->layer), "%s", r->layer);
    }
    a->count++;
}

void load_stats_merge(struct load_stats *dst, const struct load_stats *src)
{
    for (int k = 0; k < LOAD_KIND_COUNT; k++) {
        dst->requests[k] += src->requests[k];
        dst->transport_errors[k] += src->transport_errors[k];
        dst->server_errors[k] += src->server_errors[k];
        dst->retries[k] += src->retries[k];
        dst->unanswered[k] += src->unanswered[k];
        hist_merge(&dst->latency[k], &src->latency[k]);
    }
    hist_merge(&dst->latency_load, &src->latency_load);
    dst->orders_created += src->orders_created;
    dst->answers_other += src->answers_other;
    if (dst->first_transport_error[0] == '\0')
        memcpy(dst->first_transport_error, src->first_transport_error,
               sizeof(dst->first_transport_error));
    if (src->elapsed_s > dst->elapsed_s)
        dst->elapsed_s = src->elapsed_s;
    if (src->tick_count > 0 && dst->tick_count == 0 && dst->t0 <= 0) {
        dst->t0 = src->t0;
        dst->tick_s = src->tick_s;
    }
    dst->ticks_truncated = dst->ticks_truncated || src->ticks_truncated;
    for (size_t i = 0; i < src->tick_count; i++) {
        /* Engines of one run share t0 and the interval; another origin is
         * shifted to ours. */
        double at = (double)i + (src->t0 - dst->t0) / dst->tick_s;
        const struct load_tick *s = &src->ticks[i];
        struct load_tick *d;

        if (s->done == 0)
            continue;
        d = tick_at(dst, at > 0 ? (size_t)(at + 0.5) : 0);
        if (d == NULL)
            continue;
        d->done += s->done;
        d->errors += s->errors;
        d->created += s->created;
        d->replays += s->replays;
        d->rejections += s->rejections;
        hist_small_merge(&d->latency, &s->latency);
    }
    for (unsigned i = 0; i < src->answer_count; i++) {
        const struct load_answer *s = &src->answers[i];
        bool merged = false;

        for (unsigned j = 0; j < dst->answer_count; j++) {
            struct load_answer *d = &dst->answers[j];

            if (d->kind == s->kind && d->status == s->status && d->replayed == s->replayed &&
                d->retried == s->retried && strcmp(d->code, s->code) == 0 &&
                strcmp(d->layer, s->layer) == 0) {
                d->count += s->count;
                merged = true;
                break;
            }
        }
        if (merged)
            continue;
        if (dst->answer_count == LOAD_ANSWERS_MAX)
            dst->answers_other += s->count;
        else
            dst->answers[dst->answer_count++] = *s;
    }
}

long long load_engine_budget_left(const struct load_engine *e)
{
    long long left = 1LL << 60;

    if (e->stopped || engine_interrupted)
        return 0;
    if (e->cfg.deadline > 0 && load_now() >= e->cfg.deadline)
        return 0;
    if (e->cfg.max_requests > 0)
        left = e->cfg.max_requests - e->started;
    return left > 0 ? left : 0;
}

void load_engine_stop(struct load_engine *e)
{
    e->stopped = true;
}

static CURL *easy_get(struct load_engine *e)
{
    if (e->idle_count > 0)
        return e->idle[--e->idle_count];
    return curl_easy_init();
}

static void easy_put(struct load_engine *e, CURL *h)
{
    if (e->idle_count == e->idle_cap) {
        int cap = e->idle_cap == 0 ? 64 : e->idle_cap * 2;
        CURL **p = realloc(e->idle, (size_t)cap * sizeof(*p));

        if (p == NULL) {
            curl_easy_cleanup(h);
            return;
        }
        e->idle = p;
        e->idle_cap = cap;
    }
    curl_easy_reset(h);
    e->idle[e->idle_count++] = h;
}

bool load_answer_uncertain(const struct load_req *r)
{
    return r->status == 0 || r->status >= 500 ||
           (r->retry_in_progress && r->status == 409 &&
            strcmp(r->code, "REQUEST_IN_PROGRESS") == 0);
}

/* Whether r is to be sent again, and when: sets r->not_before and, after
 * a transport error (or a check's 503), moves an unpinned request to the
 * next target. */
static bool retry_plan(struct load_engine *e, struct load_req *r)
{
    double delay;

    r->uncertain = load_answer_uncertain(r);
    if (!r->uncertain || e->cfg.retries <= 0 || r->attempts > e->cfg.retries || engine_interrupted)
        return false;
    if (r->status == 0) {
        /* A pinned request (a check of one target) reports the target
         * down instead of trying again. */
        if (r->pinned)
            return false;
        /* Another target at once; a short pause once each was tried. */
        delay = r->attempts < e->cfg.target_count ? 0.0 : 0.2;
    } else {
        delay = r->retry_after_s >= 0 ? (double)r->retry_after_s : 1.0;
        if (delay > 5.0)
            delay = 5.0;
    }
    if (r->t_end + delay - r->first_start > e->cfg.retry_window_s)
        return false;
    /* A check (LOAD_CONTROL) answered 503 reads from the next target too:
     * an instance whose database node is down answers 503 to the end, and
     * the audit must read the books through one that is up. */
    if ((r->status == 0 || (r->kind == LOAD_CONTROL && r->status == 503)) && !r->pinned)
        r->target = (r->target + 1) % e->cfg.target_count;
    r->not_before = r->t_end + delay;
    return true;
}

/* Clears the answer of the last attempt before the next one. */
static void answer_clear(struct load_req *r)
{
    r->status = 0;
    r->error[0] = '\0';
    r->code[0] = '\0';
    r->layer[0] = '\0';
    r->replayed = false;
    r->retry_after_s = -1;
    json_decref(r->json);
    r->json = NULL;
    r->resp_len = 0;
    r->uncertain = false;
}

static void pend_add(struct load_engine *e, struct load_req *r)
{
    if (e->pend_count == e->pend_cap) {
        int cap = e->pend_cap == 0 ? 64 : e->pend_cap * 2;
        struct load_req **p = realloc(e->pend, (size_t)cap * sizeof(*p));

        if (p == NULL) {
            fprintf(stderr, "ticketd-load: out of memory\n");
            abort();
        }
        e->pend = p;
        e->pend_cap = cap;
    }
    e->pend[e->pend_count++] = r;
}

/* Hands r to libcurl now. Returns -1 on an internal error (r freed). */
static int launch(struct load_engine *e, struct load_req *r)
{
    CURL *h = easy_get(e);

    if (h == NULL) {
        load_req_free(r);
        return -1;
    }
    easy_setup(e, h, r);
    r->t_start = load_now();
    if (r->attempts == 0)
        r->first_start = r->t_start;
    r->attempts++;
    if (observer.sent != NULL)
        observer.sent(r);
    if (curl_multi_add_handle(e->multi, h) != CURLM_OK) {
        curl_easy_cleanup(h);
        load_req_free(r);
        return -1;
    }
    return 0;
}

static int engine_loop(struct load_engine *e, int concurrency, bool bounded, load_next_fn next,
                       load_done_fn done, void *arg)
{
    double t0 = load_now();
    int inflight = 0; /* with libcurl or waiting in pend[] */
    int rc = -1;

    if (concurrency < 1)
        concurrency = 1;
    /* Keep one cached connection per slot so that bursts reuse warm
     * connections instead of opening new ones. */
    curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, (long)concurrency + 8);
    for (;;) {
        int running = 0;
        int queued = 0;
        double now = load_now();
        double next_due = 0;
        CURLMsg *msg;

        /* Retries and delayed copies whose time has come. */
        for (int i = 0; i < e->pend_count;) {
            struct load_req *r = e->pend[i];

            if (r->not_before > now) {
                if (next_due == 0 || r->not_before < next_due)
                    next_due = r->not_before;
                i++;
                continue;
            }
            e->pend[i] = e->pend[--e->pend_count];
            if (launch(e, r) != 0)
                goto out;
        }
        /* Start everything next() offers now, before transferring any of
         * it, so that a group leaves together. */
        while (inflight < concurrency && (!bounded || load_engine_budget_left(e) > 0)) {
            struct load_req *r = next(arg, concurrency - inflight);

            if (r == NULL)
                break;
            if (bounded)
                e->started++;
            inflight++;
            if (r->delay_s > 0) {
                r->not_before = now + r->delay_s;
                if (next_due == 0 || r->not_before < next_due)
                    next_due = r->not_before;
                pend_add(e, r);
            } else if (launch(e, r) != 0) {
                goto out;
            }
        }
        if (inflight == 0)
            break;
        if (curl_multi_perform(e->multi, &running) != CURLM_OK)
            goto out;
        while ((msg = curl_multi_info_read(e->multi, &queued)) != NULL) {
            struct load_req *r = NULL;
            CURL *h = msg->easy_handle;
            bool again;

            if (msg->msg != CURLMSG_DONE)
                continue;
            curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&r);
            answer_fill(r, h, msg->data.result);
            if (observer.answered != NULL)
                observer.answered(r);
            curl_multi_remove_handle(e->multi, h);
            r->easy = NULL;
            easy_put(e, h);
            again = retry_plan(e, r);
            stats_record(e->stats, r, again);
            if (e->cfg.orders_out != NULL && !again)
                note_order(e, r);
            if (e->cfg.verbose > 0)
                fprintf(stderr, "%s %s -> %ld %s %s%s (%.1f ms)%s\n", r->method, r->path, r->status,
                        r->code, r->layer, r->replayed ? " replayed" : "",
                        (double)r->latency_us / 1000.0, again ? ", retrying" : "");
            if (again) {
                answer_clear(r);
                if (next_due == 0 || r->not_before < next_due)
                    next_due = r->not_before;
                pend_add(e, r);
                continue;
            }
            inflight--;
            done(arg, r);
            load_req_free(r);
        }
        if (running > 0 || e->pend_count > 0) {
            int wait_ms = 50;

            if (e->pend_count > 0 && next_due > 0) {
                double left = (next_due - load_now()) * 1000.0;

                wait_ms = left <= 0 ? 0 : left < 50 ? (int)left + 1 : 50;
            }
            if (curl_multi_poll(e->multi, NULL, 0, wait_ms, NULL) != CURLM_OK)
                goto out;
        }
    }
    rc = 0;
out:
    if (bounded)
        e->stats->elapsed_s += load_now() - t0;
    return rc;
}

int load_engine_run(struct load_engine *e, int concurrency, load_next_fn next, load_done_fn done,
                    void *arg)
{
    return engine_loop(e, concurrency, true, next, done, arg);
}

int load_engine_run_control(struct load_engine *e, int concurrency, load_next_fn next,
                            load_done_fn done, void *arg)
{
    return engine_loop(e, concurrency, false, next, done, arg);
}

int load_engine_call(struct load_engine *e, struct load_req *r)
{
    for (;;) {
        CURLcode res;
        bool again;

        r->kind = LOAD_CONTROL;
        curl_easy_reset(e->control);
        easy_setup(e, e->control, r);
        r->t_start = load_now();
        if (r->attempts == 0)
            r->first_start = r->t_start;
        r->attempts++;
        res = curl_easy_perform(e->control);
        answer_fill(r, e->control, res);
        r->easy = NULL;
        again = retry_plan(e, r);
        stats_record(e->stats, r, again);
        if (e->cfg.verbose > 0)
            fprintf(stderr, "%s %s -> %ld %s%s\n", r->method, r->path, r->status, r->code,
                    again ? ", retrying" : "");
        if (!again)
            break;
        answer_clear(r);
        if (r->not_before > load_now()) {
            double wait = r->not_before - load_now();
            struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};

            nanosleep(&ts, NULL);
        }
    }
    return r->status == 0 ? -1 : 0;
}

void load_engine_stats_add(struct load_engine *e, const struct load_stats *src)
{
    load_stats_merge(e->stats, src);
}

const struct load_stats *load_engine_stats(const struct load_engine *e)
{
    return e->stats;
}
