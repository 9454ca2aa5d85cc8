#include "load_verdict.h"

#include "load_sign.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Only the first few messages of each list are kept and printed; the
 * counts stay exact. */
#define VERDICT_MSGS    12
#define VERDICT_CHECKS  32
#define VERDICT_FIGURES 32
/* How often the points and ticketing wait asks again. */
#define VERDICT_POLL_S 0.5

struct vsession {
    uint64_t id;
    long long capacity;
    long long held;
    long long uncertain;
    bool read_ok;
    long long stock;
    long long server_capacity;
};

struct vuser {
    uint64_t id;
    long long expected;
    long long seen;
    bool read_ok;
};

struct vticket {
    uint64_t user;
    char order_no[32];
    char status[24];
};

struct vcheck {
    char name[64];
    bool ok;
    char detail[240];
};

/* One answer of GET /api/v1/admin/audit (or several merged: a run with
 * more sessions than one request names). */
struct vaudit {
    bool read;
    long status;
    bool ok;
    bool scoped; /* the answer looked at the run's sessions only */
    int failed;
    struct vcheck checks[VERDICT_CHECKS];
    int count;
};

struct vmsgs {
    long long count;
    int n;
    char *lines[VERDICT_MSGS];
};

struct verdict {
    pthread_mutex_t lock;

    struct vsession *sessions;
    int session_count;
    int session_cap;

    struct vuser *users;
    size_t user_count;
    size_t user_cap;
    /* Open addressing over users[], so that a run with many paying users
     * finds each in constant time. Slots hold index + 1; 0 is empty. */
    size_t *user_slots;
    size_t user_slot_cap;

    struct vticket *tickets;
    size_t ticket_count;
    size_t ticket_cap;
    long long tickets_pending;

    long long damage[DAMAGE_COUNT];
    struct vmsgs damage_msgs;
    struct vmsgs forbidden; /* examples of forbidden answers (one line may stand for several) */
    struct vmsgs observations;
    struct vmsgs notes;
    struct vmsgs failures;

    double points_wait_s;
    bool points_checked;
    bool points_caught_up;
    long long points_users_off;

    long long seats_lost;
    long long sessions_uncertain;

    struct {
        const char *name;
        long long value;
    } figures[VERDICT_FIGURES];
    int figure_count;

    bool audit_skipped;
    /* The run's audit: its own sessions, their orders and payments and
     * the users who ordered on them. Its failed checks are damage. */
    struct vaudit audit;
    /* The whole database's, read when the run's was scoped: checks red
     * there and green in the run's were left by earlier runs. */
    struct vaudit whole;
    int earlier_failed;
};

static void msgs_add(struct vmsgs *m, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void msgs_add(struct vmsgs *m, const char *fmt, va_list ap)
{
    char line[512];

    m->count++;
    if (m->n == VERDICT_MSGS)
        return;
    vsnprintf(line, sizeof(line), fmt, ap);
    m->lines[m->n++] = load_xstrdup(line);
}

static void msgs_add_fmt(struct vmsgs *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void msgs_add_fmt(struct vmsgs *m, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    msgs_add(m, fmt, ap);
    va_end(ap);
}

static void msgs_free(struct vmsgs *m)
{
    for (int i = 0; i < m->n; i++)
        free(m->lines[i]);
}

struct verdict *verdict_new(void)
{
    struct verdict *v = load_xcalloc(1, sizeof(*v));

    pthread_mutex_init(&v->lock, NULL);
    return v;
}

void verdict_free(struct verdict *v)
{
    if (v == NULL)
        return;
    msgs_free(&v->damage_msgs);
    msgs_free(&v->forbidden);
    msgs_free(&v->observations);
    msgs_free(&v->notes);
    msgs_free(&v->failures);
    free(v->sessions);
    free(v->users);
    free(v->user_slots);
    free(v->tickets);
    pthread_mutex_destroy(&v->lock);
    free(v);
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    size_t ncap = *cap == 0 ? 64 : *cap;
    void *np;

    if (need <= *cap)
        return p;
    while (ncap < need)
        ncap *= 2;
    np = realloc(p, ncap * elem);
    if (np == NULL) {
        fprintf(stderr, "ticketd-load: out of memory\n");
        abort();
    }
    *cap = ncap;
    return np;
}

int verdict_session_add(struct verdict *v, uint64_t id, long long capacity)
{
    size_t cap;
    int idx;

    pthread_mutex_lock(&v->lock);
    cap = (size_t)v->session_cap;
    v->sessions = grow(v->sessions, &cap, (size_t)v->session_count + 1, sizeof(*v->sessions));
    v->session_cap = (int)cap;
    idx = v->session_count++;
    memset(&v->sessions[idx], 0, sizeof(v->sessions[idx]));
    v->sessions[idx].id = id;
    v->sessions[idx].capacity = capacity;
    pthread_mutex_unlock(&v->lock);
    return idx;
}

void verdict_session_held(struct verdict *v, int idx, long long delta)
{
    pthread_mutex_lock(&v->lock);
    if (idx >= 0 && idx < v->session_count)
        v->sessions[idx].held += delta;
    pthread_mutex_unlock(&v->lock);
}

void verdict_session_uncertain(struct verdict *v, int idx)
{
    pthread_mutex_lock(&v->lock);
    if (idx >= 0 && idx < v->session_count)
        v->sessions[idx].uncertain++;
    pthread_mutex_unlock(&v->lock);
}

static size_t user_hash(uint64_t id, size_t cap)
{
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdULL;
    id ^= id >> 33;
    return (size_t)id & (cap - 1);
}

static void user_slots_rebuild(struct verdict *v, size_t cap)
{
    free(v->user_slots);
    v->user_slots = load_xcalloc(cap, sizeof(size_t));
    v->user_slot_cap = cap;
    for (size_t i = 0; i < v->user_count; i++) {
        size_t h = user_hash(v->users[i].id, cap);

        while (v->user_slots[h] != 0)
            h = (h + 1) & (cap - 1);
        v->user_slots[h] = i + 1;
    }
}

void verdict_points_expect(struct verdict *v, uint64_t user_id, long long points)
{
    size_t h;

    pthread_mutex_lock(&v->lock);
    if (v->user_slot_cap == 0 || (v->user_count + 1) * 2 > v->user_slot_cap)
        user_slots_rebuild(v, v->user_slot_cap == 0 ? 256 : v->user_slot_cap * 2);
    h = user_hash(user_id, v->user_slot_cap);
    while (v->user_slots[h] != 0) {
        struct vuser *u = &v->users[v->user_slots[h] - 1];

        if (u->id == user_id) {
            u->expected += points;
            goto out;
        }
        h = (h + 1) & (v->user_slot_cap - 1);
    }
    v->users = grow(v->users, &v->user_cap, v->user_count + 1, sizeof(*v->users));
    memset(&v->users[v->user_count], 0, sizeof(v->users[0]));
    v->users[v->user_count].id = user_id;
    v->users[v->user_count].expected = points;
    v->user_count++;
    v->user_slots[h] = v->user_count;
out:
    pthread_mutex_unlock(&v->lock);
}

void verdict_ticket_expect(struct verdict *v, uint64_t user_id, const char *order_no)
{
    struct vticket *t;

    pthread_mutex_lock(&v->lock);
    v->tickets = grow(v->tickets, &v->ticket_cap, v->ticket_count + 1, sizeof(*v->tickets));
    t = &v->tickets[v->ticket_count++];
    memset(t, 0, sizeof(*t));
    t->user = user_id;
    snprintf(t->order_no, sizeof(t->order_no), "%s", order_no);
    pthread_mutex_unlock(&v->lock);
}

void verdict_damage(struct verdict *v, enum verdict_damage kind, long long n, const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&v->lock);
    v->damage[kind] += n;
    va_start(ap, fmt);
    msgs_add(&v->damage_msgs, fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&v->lock);
}

void verdict_figure(struct verdict *v, const char *name, long long n)
{
    int i;

    pthread_mutex_lock(&v->lock);
    for (i = 0; i < v->figure_count; i++)
        if (strcmp(v->figures[i].name, name) == 0)
            break;
    if (i == v->figure_count && i < VERDICT_FIGURES) {
        v->figures[i].name = name;
        v->figures[i].value = 0;
        v->figure_count++;
    }
    if (i < VERDICT_FIGURES)
        v->figures[i].value += n;
    pthread_mutex_unlock(&v->lock);
}

static void forbidden_add(struct verdict *v, long long n, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

static void forbidden_add(struct verdict *v, long long n, const char *fmt, va_list ap)
{
    pthread_mutex_lock(&v->lock);
    v->damage[DAMAGE_FORBIDDEN_ANSWER] += n;
    msgs_add(&v->forbidden, fmt, ap);
    pthread_mutex_unlock(&v->lock);
}

void verdict_anomaly(struct verdict *v, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    forbidden_add(v, 1, fmt, ap);
    va_end(ap);
}

void verdict_anomalies(struct verdict *v, long long n, const char *fmt, ...)
{
    va_list ap;

    if (n <= 0)
        return;
    va_start(ap, fmt);
    forbidden_add(v, n, fmt, ap);
    va_end(ap);
}

/* msgs_add under the verdict's lock: the load's threads report at once. */
static void locked_add(struct verdict *v, struct vmsgs *m, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

static void locked_add(struct verdict *v, struct vmsgs *m, const char *fmt, va_list ap)
{
    pthread_mutex_lock(&v->lock);
    msgs_add(m, fmt, ap);
    pthread_mutex_unlock(&v->lock);
}

void verdict_observation(struct verdict *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    locked_add(v, &v->observations, fmt, ap);
    va_end(ap);
}

void verdict_note(struct verdict *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    locked_add(v, &v->notes, fmt, ap);
    va_end(ap);
}

void verdict_fail(struct verdict *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    locked_add(v, &v->failures, fmt, ap);
    va_end(ap);
}

/* Answers came both before and after the fault began: it hit a load in
 * progress, not a load that had not started or was over. */
bool verdict_fault_during_load(const struct verdict_fault *f)
{
    return f->started_s >= 0 && f->started_s < f->load_end_s && f->answers_before > 0 &&
           f->answers_after > 0;
}

bool verdict_failed(const struct verdict *v)
{
    return v->failures.count > 0;
}

long long verdict_damage_total(const struct verdict *v)
{
    long long total = v->audit.failed;

    for (int k = 0; k < DAMAGE_COUNT; k++)
        total += v->damage[k];
    return total;
}

/* ---- asking the service ------------------------------------------------ */

static struct load_req *control_get(const char *jwt_secret, uint64_t user, bool admin,
                                    const char *path)
{
    char jwt[SIGN_JWT_MAX];
    struct load_req *r = load_req_new(LOAD_CONTROL, "GET", "%s", path);

    if (user != 0 && sign_jwt(jwt_secret, user, admin, 3600, jwt, sizeof(jwt)) == 0)
        load_req_header(r, "Authorization: Bearer %s", jwt);
    load_req_header(r, "Accept: application/json");
    return r;
}

/* A batch of control reads run through the engine, outside the budget. */
struct readbatch {
    struct load_req **reqs;
    size_t n;
    size_t pos;
    struct verdict *v;
    int errors;
};

static struct load_req *readbatch_next(void *arg, int free_slots)
{
    struct readbatch *b = arg;

    (void)free_slots;
    if (b->pos == b->n)
        return NULL;
    return b->reqs[b->pos++];
}

static void points_done(void *arg, struct load_req *r)
{
    struct readbatch *b = arg;
    struct vuser *u = &b->v->users[r->tag];
    json_t *p = r->json != NULL ? json_object_get(r->json, "points") : NULL;

    if (r->status != 200 || !json_is_integer(p)) {
        b->errors++;
        return;
    }
    u->read_ok = true;
    u->seen = (long long)json_integer_value(p);
}

static void ticket_done(void *arg, struct load_req *r)
{
    struct readbatch *b = arg;
    struct vticket *t = &b->v->tickets[r->tag];
    const char *s = r->json != NULL ? json_string_value(json_object_get(r->json, "status")) : NULL;

    if (r->status != 200 || s == NULL) {
        b->errors++;
        return;
    }
    snprintf(t->status, sizeof(t->status), "%s", s);
}

static bool ticket_final(const struct vticket *t)
{
    return strcmp(t->status, "TICKETED") == 0 || strcmp(t->status, "COMPLETED") == 0;
}

static void readbatch_run(struct load_engine *e, struct readbatch *b, load_done_fn done)
{
    load_engine_run_control(e, 16, readbatch_next, done, b);
    /* Anything not started (none: control runs are not budgeted) is freed. */
    for (size_t i = b->pos; i < b->n; i++)
        load_req_free(b->reqs[i]);
    free(b->reqs);
    b->reqs = NULL;
}

/* Polls /me and the paid orders until every user has the points expected
 * and every paid order is ticketed, or the settle time is over. */
static void wait_consumers(struct verdict *v, struct load_engine *e, const char *jwt_secret,
                           double settle_s)
{
    double t0 = load_now();
    double deadline = t0 + settle_s;

    if (v->user_count == 0 && v->ticket_count == 0)
        return;
    v->points_checked = v->user_count > 0;
    for (;;) {
        struct readbatch b = {.v = v};
        size_t want = 0;
        long long points_off = 0;
        long long pending = 0;

        b.reqs = load_xcalloc(v->user_count + v->ticket_count, sizeof(*b.reqs));
        for (size_t i = 0; i < v->user_count; i++) {
            struct vuser *u = &v->users[i];

            /* Too many points never shrink: stop asking such a user. */
            if (u->read_ok && u->seen >= u->expected)
                continue;
            b.reqs[want] = control_get(jwt_secret, u->id, false, "/api/v1/me");
            b.reqs[want++]->tag = (long)i;
        }
        b.n = want;
        readbatch_run(e, &b, points_done);

        b.reqs = load_xcalloc(v->ticket_count + 1, sizeof(*b.reqs));
        b.pos = 0;
        want = 0;
        for (size_t i = 0; i < v->ticket_count; i++) {
            struct vticket *t = &v->tickets[i];

            if (ticket_final(t))
                continue;
            char path[96];

            snprintf(path, sizeof(path), "/api/v1/orders/%s", t->order_no);
            b.reqs[want] = control_get(jwt_secret, t->user, false, path);
            b.reqs[want++]->tag = (long)i;
        }
        b.n = want;
        readbatch_run(e, &b, ticket_done);

        for (size_t i = 0; i < v->user_count; i++)
            if (!v->users[i].read_ok || v->users[i].seen < v->users[i].expected)
                points_off++;
        for (size_t i = 0; i < v->ticket_count; i++)
            if (!ticket_final(&v->tickets[i]))
                pending++;
        v->points_users_off = points_off;
        v->tickets_pending = pending;
        if (points_off == 0 && pending == 0) {
            v->points_caught_up = true;
            break;
        }
        if (load_now() + VERDICT_POLL_S >= deadline)
            break;
        /* What it waits for, so that a watcher (the lab's page) shows why
         * nothing else moves. */
        fprintf(stderr,
                "ticketd-load: settling: %lld users' points and %lld tickets not final yet "
                "(%.0f of %.0f s)\n",
                points_off, pending, load_now() - t0, settle_s);
        usleep((useconds_t)(VERDICT_POLL_S * 1e6));
    }
    v->points_wait_s = load_now() - t0;
}

static void points_judge(struct verdict *v)
{
    long long over = 0, under = 0;
    long long users_over = 0, users_under = 0;
    long long unread = 0;

    for (size_t i = 0; i < v->user_count; i++) {
        struct vuser *u = &v->users[i];

        if (!u->read_ok) {
            unread++;
            continue;
        }
        if (u->seen > u->expected) {
            over += u->seen - u->expected;
            users_over++;
            if (users_over <= 3)
                msgs_add_fmt(&v->damage_msgs, "user %llu has %lld points, expected %lld",
                             (unsigned long long)u->id, u->seen, u->expected);
        } else if (u->seen < u->expected) {
            under += u->expected - u->seen;
            users_under++;
            if (users_under <= 3)
                msgs_add_fmt(&v->damage_msgs,
                             "user %llu has %lld points after %.1f s, expected %lld",
                             (unsigned long long)u->id, u->seen, v->points_wait_s, u->expected);
        }
    }
    v->damage[DAMAGE_DOUBLE_POINTS] += over;
    v->damage[DAMAGE_MISSING_POINTS] += under;
    if (unread > 0)
        msgs_add_fmt(&v->failures, "could not read /api/v1/me of %lld users", unread);
    if (v->tickets_pending > 0)
        msgs_add_fmt(&v->observations, "%lld paid orders not TICKETED after %.1f s",
                     v->tickets_pending, v->points_wait_s);
}

static void sessions_read(struct verdict *v, struct load_engine *e)
{
    for (int i = 0; i < v->session_count; i++) {
        struct vsession *s = &v->sessions[i];
        struct load_req *r =
            load_req_new(LOAD_CONTROL, "GET", "/api/v1/sessions/%llu", (unsigned long long)s->id);
        json_t *stock;
        json_t *cap;

        load_engine_call(e, r);
        stock = r->json != NULL ? json_object_get(r->json, "stock") : NULL;
        cap = r->json != NULL ? json_object_get(r->json, "capacity") : NULL;
        if (r->status == 200 && json_is_integer(stock)) {
            s->read_ok = true;
            s->stock = (long long)json_integer_value(stock);
            s->server_capacity =
                json_is_integer(cap) ? (long long)json_integer_value(cap) : s->capacity;
        } else {
            msgs_add_fmt(&v->failures, "GET /api/v1/sessions/%llu answered %ld",
                         (unsigned long long)s->id, r->status);
        }
        load_req_free(r);
    }
}

/* Seats: what the run's own orders hold against what the session lost.
 * Each measure of an oversell sees the same extra seats, so the largest
 * one is counted, once. */
static void sessions_judge(struct verdict *v)
{
    for (int i = 0; i < v->session_count; i++) {
        struct vsession *s = &v->sessions[i];
        long long taken;
        long long over = 0;

        if (!s->read_ok)
            continue;
        taken = s->server_capacity - s->stock;
        if (s->stock < 0) {
            over = -s->stock;
            msgs_add_fmt(&v->damage_msgs, "session %llu has stock %lld", (unsigned long long)s->id,
                         s->stock);
        }
        if (s->held > s->capacity) {
            if (s->held - s->capacity > over)
                over = s->held - s->capacity;
            msgs_add_fmt(&v->damage_msgs, "session %llu: %lld seats in orders, capacity %lld",
                         (unsigned long long)s->id, s->held, s->capacity);
        }
        if (s->held > taken && s->uncertain == 0) {
            if (s->held - taken > over)
                over = s->held - taken;
            msgs_add_fmt(&v->damage_msgs,
                         "session %llu: %lld seats in orders but %lld taken from stock",
                         (unsigned long long)s->id, s->held, taken);
        } else if (taken > s->held && s->uncertain == 0) {
            v->seats_lost += taken - s->held;
            msgs_add_fmt(&v->observations,
                         "session %llu: %lld seats taken from stock but %lld held by orders",
                         (unsigned long long)s->id, taken, s->held);
        } else if (taken != s->held) {
            v->sessions_uncertain++;
        }
        v->damage[DAMAGE_OVERSOLD] += over;
    }
}

/* Reads one audit answer into a (emptied first). Returns 0, or -1 if the
 * service did not answer 200 with JSON. */
static int audit_get(struct load_engine *e, const char *jwt_secret, uint64_t admin_user,
                     const char *path, struct vaudit *a)
{
    struct load_req *r = control_get(jwt_secret, admin_user, true, path);
    size_t i;
    json_t *c;
    int rc = -1;

    load_engine_call(e, r);
    memset(a, 0, sizeof(*a));
    a->status = r->status;
    if (r->status != 200 || r->json == NULL)
        goto out;
    a->read = true;
    a->ok = json_is_true(json_object_get(r->json, "ok"));
    /* A ticketd that knows no scope ignores ?sessions: its answer names
     * none, and is the whole database's. */
    a->scoped = json_is_array(json_object_get(json_object_get(r->json, "scope"), "sessions"));
    json_array_foreach(json_object_get(r->json, "checks"), i, c)
    {
        struct vcheck *k;
        const char *name = json_string_value(json_object_get(c, "name"));
        const char *detail = json_string_value(json_object_get(c, "detail"));

        if (a->count == VERDICT_CHECKS)
            break;
        k = &a->checks[a->count++];
        snprintf(k->name, sizeof(k->name), "%s", name != NULL ? name : "?");
        snprintf(k->detail, sizeof(k->detail), "%s", detail != NULL ? detail : "");
        k->ok = json_is_true(json_object_get(c, "ok"));
        if (!k->ok)
            a->failed++;
    }
    if (!a->ok && a->failed == 0)
        a->failed = 1;
    rc = 0;
out:
    load_req_free(r);
    return rc;
}

static const struct vcheck *audit_find(const struct vaudit *a, const char *name)
{
    for (int i = 0; i < a->count; i++)
        if (strcmp(a->checks[i].name, name) == 0)
            return &a->checks[i];
    return NULL;
}

/* Folds the answer for another group of the run's sessions into dst: a
 * check fails if it fails for any group, with that group's detail. */
static void audit_merge(struct vaudit *dst, const struct vaudit *src)
{
    dst->read = true;
    dst->status = src->status;
    dst->scoped = dst->scoped && src->scoped;
    dst->ok = dst->ok && src->ok;
    for (int i = 0; i < src->count; i++) {
        struct vcheck *k = (struct vcheck *)audit_find(dst, src->checks[i].name);

        if (k == NULL && dst->count < VERDICT_CHECKS) {
            dst->checks[dst->count++] = src->checks[i];
            dst->failed += !src->checks[i].ok;
        } else if (k != NULL && k->ok && !src->checks[i].ok) {
            *k = src->checks[i];
            dst->failed++;
        }
    }
    if (!dst->ok && dst->failed == 0)
        dst->failed = 1;
}

/* Sessions named by one scoped audit request: well under the service's
 * limit (256), and a request target of a few kilobytes at most. */
#define AUDIT_SCOPE_CHUNK 200

/* The run's audit: scoped to the run's sessions, in groups; the whole
 * database's if the run has no session of its own (--session). */
static int audit_read(struct verdict *v, struct load_engine *e, const char *jwt_secret,
                      uint64_t admin_user)
{
    static const char base[] = "/api/v1/admin/audit";

    memset(&v->audit, 0, sizeof(v->audit));
    if (v->session_count == 0)
        return audit_get(e, jwt_secret, admin_user, base, &v->audit);
    v->audit.ok = true;
    v->audit.scoped = true;
    for (int first = 0; first < v->session_count; first += AUDIT_SCOPE_CHUNK) {
        char path[sizeof(base) + 16 + AUDIT_SCOPE_CHUNK * 21];
        size_t used = (size_t)snprintf(path, sizeof(path), "%s?sessions=", base);
        struct vaudit part;

        for (int i = first; i < v->session_count && i < first + AUDIT_SCOPE_CHUNK; i++)
            used += (size_t)snprintf(path + used, sizeof(path) - used, "%s%llu",
                                     i > first ? "," : "", (unsigned long long)v->sessions[i].id);
        if (audit_get(e, jwt_secret, admin_user, path, &part) != 0) {
            v->audit.status = part.status;
            v->audit.read = false;
            return -1;
        }
        audit_merge(&v->audit, &part);
    }
    return 0;
}

/* After a scoped audit: the whole database's, and the checks red there
 * but green for this run (damage earlier runs left). */
static void audit_read_whole(struct verdict *v, struct load_engine *e, const char *jwt_secret,
                             uint64_t admin_user)
{
    v->earlier_failed = 0;
    if (!v->audit.scoped)
        return;
    if (audit_get(e, jwt_secret, admin_user, "/api/v1/admin/audit", &v->whole) != 0) {
        msgs_add_fmt(&v->observations, "GET /api/v1/admin/audit (whole database) answered %ld",
                     v->whole.status);
        return;
    }
    for (int i = 0; i < v->whole.count; i++) {
        const struct vcheck *mine = audit_find(&v->audit, v->whole.checks[i].name);

        if (!v->whole.checks[i].ok && (mine == NULL || mine->ok))
            v->earlier_failed++;
    }
}

/* True if the audit failed only in a way the consumers may still mend. */
static bool audit_may_catch_up(const struct verdict *v)
{
    bool points = false;

    if (v->damage[DAMAGE_DOUBLE_POINTS] > 0)
        return false;
    for (int i = 0; i < v->audit.count; i++) {
        if (v->audit.checks[i].ok)
            continue;
        if (strcmp(v->audit.checks[i].name, "points_match_paid_orders") != 0)
            return false;
        points = true;
    }
    return points;
}

int verdict_check(struct verdict *v, struct load_engine *e, const char *jwt_secret,
                  uint64_t admin_user, double settle_s, bool audit)
{
    double deadline = load_now() + settle_s;

    wait_consumers(v, e, jwt_secret, settle_s);
    points_judge(v);
    sessions_read(v, e);
    sessions_judge(v);
    if (!audit) {
        v->audit_skipped = true;
        return 0;
    }
    /* The audit's points check holds only once the consumers caught up:
     * ask again while it fails and the settle time lasts. Nothing else the
     * audit checks changes by waiting, and neither do points already above
     * what they should be. */
    for (;;) {
        if (audit_read(v, e, jwt_secret, admin_user) != 0) {
            msgs_add_fmt(&v->observations, "GET /api/v1/admin/audit answered %ld", v->audit.status);
            return -1;
        }
        if (!audit_may_catch_up(v) || load_now() + VERDICT_POLL_S >= deadline)
            break;
        usleep((useconds_t)(VERDICT_POLL_S * 1e6));
    }
    audit_read_whole(v, e, jwt_secret, admin_user);
    return 0;
}

/* ---- the table ----------------------------------------------------------- */

static const char *const kind_names[LOAD_KIND_COUNT] = {
    [LOAD_ORDER] = "orders",   [LOAD_TOKEN] = "tokens",    [LOAD_CALLBACK] = "callbacks",
    [LOAD_CANCEL] = "cancels", [LOAD_CONTROL] = "control",
};

/* Load requests whose last answer left the outcome unknown. */
static uint64_t unanswered(const struct load_stats *st)
{
    uint64_t n = 0;

    for (int k = 0; k < LOAD_KIND_COUNT; k++)
        if (k != LOAD_CONTROL)
            n += st->unanswered[k];
    return n;
}

int verdict_exit_code(const struct verdict *v, const struct load_stats *st)
{
    if (verdict_damage_total(v) > 0)
        return 2;
    if (verdict_failed(v) || unanswered(st) > 0)
        return 1;
    return 0;
}

/* The audit's word on a damage row: "ok", "FAIL", "-" (no such check) or
 * "n/a" (audit not read). Two names may back one row. */
static const char *audit_word(const struct verdict *v, const char *a, const char *b)
{
    bool found = false;

    if (!v->audit.read)
        return "n/a";
    for (int i = 0; i < v->audit.count; i++) {
        const struct vcheck *k = &v->audit.checks[i];

        if (strcmp(k->name, a) == 0 || (b != NULL && strcmp(k->name, b) == 0)) {
            if (!k->ok)
                return "FAIL";
            found = true;
        }
    }
    return found ? "ok" : "-";
}

struct damage_row {
    enum verdict_damage kind;
    const char *label;
    const char *json;
    const char *check_a;
    const char *check_b;
};

static const struct damage_row damage_rows[DAMAGE_COUNT] = {
    {DAMAGE_OVERSOLD, "oversold seats", "oversold_seats", "stock_conservation",
     "no_negative_stock"},
    {DAMAGE_DUPLICATE_ORDER, "duplicate orders for one key", "duplicate_orders",
     "one_order_per_request", NULL},
    {DAMAGE_TOKEN_REUSED, "orders beyond one per order token", "token_reused_orders", NULL, NULL},
    {DAMAGE_DOUBLE_PAYMENT, "double-applied payments", "double_applied_payments",
     "one_applied_payment_per_order", NULL},
    {DAMAGE_REFUND_APPLIED, "applied payments also refunded", "refunded_applied_payments",
     "no_refund_of_applied_payment", NULL},
    {DAMAGE_PAID_CANCELLED, "orders both paid and cancelled", "paid_cancelled_orders", NULL, NULL},
    {DAMAGE_DOUBLE_POINTS, "double-credited points", "double_credited_points",
     "points_match_paid_orders", NULL},
    {DAMAGE_MISSING_POINTS, "missing points", "missing_points", "points_match_paid_orders", NULL},
    {DAMAGE_LOCK_BYPASSED, "orders past a held session lock", "lock_bypassed_orders", NULL, NULL},
    {DAMAGE_FAILURE_REPLAYED, "retries refused forever", "failures_replayed", NULL, NULL},
    {DAMAGE_FORBIDDEN_ANSWER, "forbidden answers", "forbidden_answers", NULL, NULL},
    {DAMAGE_CART_ITEM_TWICE, "cart items bought twice", "cart_items_bought_twice", NULL, NULL},
    {DAMAGE_WRONG_REFUSAL, "keys with an order refused", "wrong_refusals", NULL, NULL},
};

static double ms(uint64_t us)
{
    return (double)us / 1000.0;
}

static uint64_t load_requests(const struct load_stats *st)
{
    uint64_t n = 0;

    for (int k = 0; k < LOAD_KIND_COUNT; k++)
        if (k != LOAD_CONTROL)
            n += st->requests[k];
    return n;
}

static void print_messages(FILE *out, const struct vmsgs *m)
{
    for (int i = 0; i < m->n; i++)
        fprintf(out, "    - %s\n", m->lines[i]);
    if (m->count > m->n)
        fprintf(out, "    - ... and %lld more\n", m->count - m->n);
}

static void print_failed_checks(FILE *out, const struct vaudit *a, const struct vaudit *skip)
{
    for (int i = 0; i < a->count; i++) {
        const struct vcheck *k = &a->checks[i];
        const struct vcheck *mine = skip != NULL ? audit_find(skip, k->name) : NULL;

        if (!k->ok && (mine == NULL || mine->ok))
            fprintf(out, "    - %s: %s\n", k->name, k->detail);
    }
}

/* The run's audit checks, among the damage rows. */
static void print_audit(const struct verdict *v, FILE *out)
{
    if (v->audit.read) {
        fprintf(out, "  %-42s %10d   of %d checks%s\n", "audit checks failed", v->audit.failed,
                v->audit.count, v->audit.scoped ? " (this run's sessions)" : " (whole database)");
        print_failed_checks(out, &v->audit, NULL);
    } else if (v->audit_skipped) {
        fprintf(out, "  %-42s %10s   (--no-audit)\n", "audit", "skipped");
    } else {
        fprintf(out, "  %-42s %10s   (answered %ld)\n", "audit", "not read", v->audit.status);
    }
}

/* Damage earlier runs left: not this run's, and not in its verdict. */
static void print_earlier(const struct verdict *v, FILE *out)
{
    if (v->earlier_failed == 0)
        return;
    fprintf(out,
            "\naudit red from earlier runs: run `make reset` (%d of %d checks fail over the "
            "whole database, not over this run's sessions; not this run's damage)\n",
            v->earlier_failed, v->whole.count);
    print_failed_checks(out, &v->whole, &v->audit);
}

static void print_table(const struct verdict *v, const struct load_stats *st,
                        const struct verdict_run_info *info, FILE *out)
{
    uint64_t total = load_requests(st);
    uint64_t transport = 0, server = 0, replays = 0, rejections = 0, callbacks = 0, retries = 0;
    double rps = st->elapsed_s > 0 ? (double)total / st->elapsed_s : 0.0;
    int exit_code = verdict_exit_code(v, st);

    for (int k = 0; k < LOAD_KIND_COUNT; k++) {
        if (k == LOAD_CONTROL)
            continue;
        transport += st->transport_errors[k];
        server += st->server_errors[k];
        retries += st->retries[k];
    }
    for (unsigned i = 0; i < st->answer_count; i++) {
        const struct load_answer *a = &st->answers[i];

        if (a->retried || a->status == 0)
            continue;
        if (a->kind == LOAD_ORDER && a->status == 201 && a->replayed)
            replays += a->count;
        else if (a->kind != LOAD_CONTROL && a->status >= 400)
            rejections += a->count;
        else if (a->kind == LOAD_CALLBACK && a->status == 200)
            callbacks += a->count;
    }

    fprintf(out, "\nticketd-load: %s against %d target%s, concurrency %d", info->scenario,
            info->target_count, info->target_count == 1 ? "" : "s", info->concurrency);
    if (info->max_requests > 0)
        fprintf(out, ", at most %lld requests", info->max_requests);
    fprintf(out, " / %.0f s\n", info->duration_s);
    for (int i = 0; i < info->target_count; i++)
        fprintf(out, "  target %s\n", info->targets[i]);

    fprintf(out, "\n%-44s %10llu   in %.2f s\n", "requests", (unsigned long long)total,
            st->elapsed_s);
    for (int k = 0; k < LOAD_KIND_COUNT; k++)
        if (st->requests[k] > 0)
            fprintf(out, "  %-42s %10llu\n", kind_names[k], (unsigned long long)st->requests[k]);
    fprintf(out, "%-44s %10llu", "transport errors", (unsigned long long)transport);
    if (st->first_transport_error[0] != '\0')
        fprintf(out, "   first: %s", st->first_transport_error);
    fprintf(out, "\n%-44s %10llu\n", "server errors (5xx)", (unsigned long long)server);
    fprintf(out, "%-44s %10llu\n", "retries (the same request sent again)",
            (unsigned long long)retries);
    for (unsigned i = 0; i < st->answer_count; i++) {
        const struct load_answer *a = &st->answers[i];
        char label[96];

        if (!a->retried || a->kind == LOAD_CONTROL)
            continue;
        if (a->status == 0)
            snprintf(label, sizeof(label), "after %s: no answer", kind_names[a->kind]);
        else
            snprintf(label, sizeof(label), "after %s %ld %s", kind_names[a->kind], a->status,
                     a->code[0] ? a->code : "-");
        fprintf(out, "  %-42s %10llu\n", label, (unsigned long long)a->count);
    }
    fprintf(out, "%-44s %10llu\n", "without a definite answer (retries spent)",
            (unsigned long long)unanswered(st));
    fprintf(out, "%-44s %10llu\n", "orders created (201, not replayed)",
            (unsigned long long)st->orders_created);
    fprintf(out, "%-44s %10llu\n", "replays (201 replayed)", (unsigned long long)replays);
    for (unsigned i = 0; i < st->answer_count; i++) {
        const struct load_answer *a = &st->answers[i];

        if (!a->retried && a->kind == LOAD_ORDER && a->status == 201 && a->replayed)
            fprintf(out, "  layer %-36s %10llu\n", a->layer[0] ? a->layer : "(none)",
                    (unsigned long long)a->count);
    }
    fprintf(out, "%-44s %10llu\n", "rejections (4xx/5xx)", (unsigned long long)rejections);
    for (unsigned i = 0; i < st->answer_count; i++) {
        const struct load_answer *a = &st->answers[i];
        char label[96];

        if (a->kind == LOAD_CONTROL || a->status < 400 || a->retried)
            continue;
        snprintf(label, sizeof(label), "%s %ld %s%s%s", kind_names[a->kind], a->status,
                 a->code[0] ? a->code : "-", a->layer[0] ? " @" : "", a->layer);
        fprintf(out, "  %-42s %10llu\n", label, (unsigned long long)a->count);
    }
    if (callbacks > 0) {
        fprintf(out, "%-44s %10llu\n", "callback outcomes (200)", (unsigned long long)callbacks);
        for (unsigned i = 0; i < st->answer_count; i++) {
            const struct load_answer *a = &st->answers[i];
            char label[96];

            if (a->kind != LOAD_CALLBACK || a->status != 200 || a->retried)
                continue;
            snprintf(label, sizeof(label), "%s%s", a->code[0] ? a->code : "(no outcome)",
                     a->replayed ? " (replayed)" : "");
            fprintf(out, "  %-42s %10llu\n", label, (unsigned long long)a->count);
        }
    }
    for (unsigned i = 0; i < st->answer_count; i++) {
        const struct load_answer *a = &st->answers[i];

        /* Anything else a load request got (e.g. a 200 cancel, a 201
         * token) is expected traffic; list only the unusual. A cart
         * (cart-storm) answers 200, replayed or not. */
        if (a->kind == LOAD_ORDER && a->status == 200 && !a->retried)
            fprintf(out, "  %-42s %10llu\n",
                    a->replayed ? "carts 200 replayed" : "carts 200 (items answered)",
                    (unsigned long long)a->count);
        else if (a->kind == LOAD_ORDER && a->status > 0 && a->status < 400 && a->status != 201 &&
                 !a->retried)
            fprintf(out, "  unexpected order answer %-18ld %10llu\n", a->status,
                    (unsigned long long)a->count);
    }
    if (st->answers_other > 0)
        fprintf(out, "  %-42s %10llu\n", "(other answers not itemised)",
                (unsigned long long)st->answers_other);

    fprintf(out, "%-44s p50 %8.2f ms   p99 %8.2f ms   max %8.2f ms\n", "latency (load requests)",
            ms(hist_percentile(&st->latency_load, 0.50)),
            ms(hist_percentile(&st->latency_load, 0.99)), ms(st->latency_load.max_us));
    for (int k = 0; k < LOAD_KIND_COUNT; k++) {
        if (k == LOAD_CONTROL || st->latency[k].count == 0)
            continue;
        fprintf(out, "  %-42s p50 %8.2f ms   p99 %8.2f ms   max %8.2f ms\n", kind_names[k],
                ms(hist_percentile(&st->latency[k], 0.50)),
                ms(hist_percentile(&st->latency[k], 0.99)), ms(st->latency[k].max_us));
    }
    fprintf(out, "%-44s %10.0f req/s\n", "throughput", rps);

    if (v->notes.count > 0) {
        fprintf(out, "\nscenario\n");
        print_messages(out, &v->notes);
    }
    if (info->fault != NULL && info->fault->command != NULL) {
        const struct verdict_fault *f = info->fault;

        char asked[64];

        if (f->after_answers >= 0)
            snprintf(asked, sizeof(asked), "after %lld answers", f->after_answers);
        else
            snprintf(asked, sizeof(asked), "at %.2f s", f->at_s);
        fprintf(out, "\nfault\n    - %s\n", f->command);
        if (f->started_s < 0)
            fprintf(out, "    - asked for %s; never ran\n", asked);
        else
            fprintf(out,
                    "    - asked for %s; ran from %.2f s (after %lld answers) to %.2f s of the "
                    "load (which ended at %.2f s, %lld answers later): exit %d%s\n",
                    asked, f->started_s, f->answers_before, f->ended_s, f->load_end_s,
                    f->answers_after, f->exit_status,
                    verdict_fault_during_load(f) ? "" : " (not during the load: it hit nothing)");
    }

    fprintf(out, "\n%-44s %10s   %s\n", "damage", "found",
            v->audit.scoped ? "audit (this run's sessions)" : "audit (whole database)");
    for (int i = 0; i < DAMAGE_COUNT; i++) {
        const struct damage_row *d = &damage_rows[i];
        char label[64];

        if (d->kind == DAMAGE_MISSING_POINTS && v->points_checked)
            snprintf(label, sizeof(label), "%s (waited %.1f s)", d->label, v->points_wait_s);
        else
            snprintf(label, sizeof(label), "%s", d->label);
        fprintf(out, "  %-42s %10lld   %s\n", label, v->damage[d->kind],
                d->kind == DAMAGE_FORBIDDEN_ANSWER   ? "- (unit: answers; each is damage)"
                : d->kind == DAMAGE_FAILURE_REPLAYED ? "- (unit: answers: a failure replayed)"
                : d->kind == DAMAGE_CART_ITEM_TWICE  ? "- (unit: orders beyond one per item key)"
                : d->kind == DAMAGE_WRONG_REFUSAL ? "- (unit: answers: 409 to a key with an order)"
                : d->check_a != NULL              ? audit_word(v, d->check_a, d->check_b)
                                                  : "-");
    }
    print_audit(v, out);
    print_messages(out, &v->damage_msgs);
    if (v->forbidden.count > 0) {
        fprintf(out, "%-44s %10lld   answers\n", "forbidden answers, first examples",
                v->damage[DAMAGE_FORBIDDEN_ANSWER]);
        print_messages(out, &v->forbidden);
    }
    if (v->observations.count > 0) {
        fprintf(out, "%-44s %10lld\n", "observations (not answers, not damage)",
                v->observations.count);
        print_messages(out, &v->observations);
    }
    if (v->failures.count > 0) {
        fprintf(out, "%-44s %10lld\n", "run errors", v->failures.count);
        print_messages(out, &v->failures);
    }
    print_earlier(v, out);
    fprintf(out, "\nverdict: %s (exit %d)\n",
            exit_code == 2   ? "DAMAGE FOUND"
            : exit_code == 1 ? "NO DAMAGE SEEN, BUT THE RUN HAD ERRORS"
                             : "NO DAMAGE",
            exit_code);
}

static json_t *json_msgs(const struct vmsgs *m)
{
    json_t *a = json_array();

    for (int i = 0; i < m->n; i++)
        json_array_append_new(a, json_string(m->lines[i]));
    return json_pack("{s:I,s:o}", "count", (json_int_t)m->count, "first", a);
}

static json_t *json_latency(const struct hist *h)
{
    return json_pack("{s:I,s:f,s:f,s:f,s:f}", "count", (json_int_t)h->count, "p50",
                     ms(hist_percentile(h, 0.50)), "p99", ms(hist_percentile(h, 0.99)), "max",
                     ms(h->max_us), "mean", hist_mean(h) / 1000.0);
}

/* One point per second: what finished in it, and its latency. */
static json_t *json_series(const struct load_stats *st, const struct verdict_run_info *info)
{
    json_t *points = json_array();
    double tick_s = st->tick_s > 0 ? st->tick_s : LOAD_TICK_S;

    for (size_t i = 0; i < st->tick_count; i++) {
        const struct load_tick *t = &st->ticks[i];

        json_array_append_new(
            points,
            json_pack("{s:f,s:I,s:f,s:I,s:I,s:I,s:I,s:f,s:f,s:f}", "t", (double)i * tick_s,
                      "requests", (json_int_t)t->done, "rps", (double)t->done / tick_s, "errors",
                      (json_int_t)t->errors, "orders_created", (json_int_t)t->created, "replays",
                      (json_int_t)t->replays, "rejections", (json_int_t)t->rejections, "p50_ms",
                      ms(hist_small_percentile(&t->latency, 0.50)), "p99_ms",
                      ms(hist_small_percentile(&t->latency, 0.99)), "max_ms",
                      ms(t->latency.max_us)));
    }
    return json_pack("{s:f,s:f,s:b,s:o}", "interval_s", tick_s, "t0_unix", info->started_unix,
                     "truncated", st->ticks_truncated, "points", points);
}

static json_t *json_checks(const struct vaudit *a)
{
    json_t *checks = json_array();

    for (int i = 0; i < a->count; i++)
        json_array_append_new(checks, json_pack("{s:s,s:b,s:s}", "name", a->checks[i].name, "ok",
                                                a->checks[i].ok, "detail", a->checks[i].detail));
    return checks;
}

/* The run's audit (its checks are damage) and what earlier runs left:
 * the whole database's audit when the run's was scoped. */
static json_t *json_audit(const struct verdict *v, json_t *checks)
{
    json_t *whole = json_null();

    if (v->audit.scoped && v->whole.read) {
        json_decref(whole);
        whole = json_pack("{s:b,s:i,s:o}", "ok", v->whole.ok, "earlier_runs_failed_checks",
                          v->earlier_failed, "checks", json_checks(&v->whole));
    }
    return json_pack("{s:b,s:I,s:b,s:s,s:o,s:o}", "read", v->audit.read, "status",
                     (json_int_t)v->audit.status, "ok", v->audit.ok, "scope",
                     v->audit.scoped ? "run" : "database", "checks", checks, "whole_database",
                     whole);
}

static int write_json(const struct verdict *v, const struct load_stats *st,
                      const struct verdict_run_info *info, const char *path)
{
    json_t *root = json_object();
    json_t *targets = json_array();
    json_t *requests = json_object();
    json_t *answers = json_array();
    json_t *by_layer = json_object();
    json_t *by_kind = json_object();
    json_t *damage = json_object();
    json_t *checks = json_checks(&v->audit);
    json_t *figures = json_object();
    uint64_t total = load_requests(st), transport = 0, server = 0, replays = 0, retries = 0;
    json_t *retried = json_object();
    json_t *fault = json_null();
    int exit_code = verdict_exit_code(v, st);
    int rc;

    for (int i = 0; i < info->target_count; i++)
        json_array_append_new(targets, json_string(info->targets[i]));
    for (int k = 0; k < LOAD_KIND_COUNT; k++) {
        json_object_set_new(requests, kind_names[k], json_integer((json_int_t)st->requests[k]));
        if (k != LOAD_CONTROL) {
            transport += st->transport_errors[k];
            server += st->server_errors[k];
            retries += st->retries[k];
            if (st->latency[k].count > 0)
                json_object_set_new(by_kind, kind_names[k], json_latency(&st->latency[k]));
        }
    }
    json_object_set_new(requests, "total", json_integer((json_int_t)total));
    for (unsigned i = 0; i < st->answer_count; i++) {
        const struct load_answer *a = &st->answers[i];

        json_array_append_new(answers,
                              json_pack("{s:s,s:I,s:s,s:s,s:b,s:b,s:I}", "kind",
                                        kind_names[a->kind], "status", (json_int_t)a->status,
                                        "code", a->code, "layer", a->layer, "replayed", a->replayed,
                                        "retried", a->retried, "count", (json_int_t)a->count));
        if (a->retried && a->kind != LOAD_CONTROL) {
            char label[96];
            json_t *n;

            if (a->status == 0)
                snprintf(label, sizeof(label), "%s no answer", kind_names[a->kind]);
            else
                snprintf(label, sizeof(label), "%s %ld %s", kind_names[a->kind], a->status,
                         a->code[0] ? a->code : "-");
            n = json_object_get(retried, label);
            json_object_set_new(
                retried, label,
                json_integer((n != NULL ? json_integer_value(n) : 0) + (json_int_t)a->count));
        }
        if (a->retried || a->status == 0)
            continue;
        if (a->kind == LOAD_ORDER && a->status == 201 && a->replayed) {
            json_t *n = json_object_get(by_layer, a->layer);

            replays += a->count;
            json_object_set_new(
                by_layer, a->layer,
                json_integer((n != NULL ? json_integer_value(n) : 0) + (json_int_t)a->count));
        }
    }
    for (int i = 0; i < DAMAGE_COUNT; i++)
        json_object_set_new(damage, damage_rows[i].json,
                            json_integer(v->damage[damage_rows[i].kind]));
    json_object_set_new(damage, "audit_failed_checks", json_integer(v->audit.failed));
    json_object_set_new(damage, "total", json_integer(verdict_damage_total(v)));

    for (int i = 0; i < v->figure_count; i++)
        json_object_set_new(figures, v->figures[i].name,
                            json_integer((json_int_t)v->figures[i].value));

    json_object_set_new(root, "tool", json_string("ticketd-load"));
    json_object_set_new(root, "scenario", json_string(info->scenario));
    json_object_set_new(root, "seed", json_integer((json_int_t)info->seed));
    json_object_set_new(root, "started_unix", json_real(info->started_unix));
    json_object_set_new(root, "targets", targets);
    json_object_set_new(root, "concurrency", json_integer(info->concurrency));
    json_object_set_new(root, "elapsed_s", json_real(st->elapsed_s));
    json_object_set_new(root, "requests", requests);
    json_object_set_new(root, "transport_errors", json_integer((json_int_t)transport));
    json_object_set_new(root, "server_errors", json_integer((json_int_t)server));
    json_object_set_new(root, "retries",
                        json_pack("{s:I,s:o}", "total", (json_int_t)retries, "after", retried));
    json_object_set_new(root, "unanswered", json_integer((json_int_t)unanswered(st)));
    if (info->fault != NULL && info->fault->command != NULL) {
        const struct verdict_fault *f = info->fault;

        json_decref(fault);
        fault = json_pack(
            "{s:s,s:o,s:o,s:I,s:I,s:f,s:f,s:f,s:i,s:b}", "command", f->command, "after_answers",
            f->after_answers >= 0 ? json_integer(f->after_answers) : json_null(), "at_s",
            f->at_s >= 0 ? json_real(f->at_s) : json_null(), "answers_before",
            (json_int_t)f->answers_before, "answers_after", (json_int_t)f->answers_after,
            "started_s", f->started_s, "ended_s", f->ended_s, "load_end_s", f->load_end_s,
            "exit_status", f->exit_status, "during_load", verdict_fault_during_load(f));
    }
    json_object_set_new(root, "fault", fault);
    json_object_set_new(root, "orders_created", json_integer((json_int_t)st->orders_created));
    json_object_set_new(root, "replays",
                        json_pack("{s:I,s:o}", "total", (json_int_t)replays, "by_layer", by_layer));
    json_object_set_new(root, "answers", answers);
    json_object_set_new(root, "latency_ms", json_latency(&st->latency_load));
    json_object_set_new(root, "latency_ms_by_kind", by_kind);
    json_object_set_new(root, "throughput_rps",
                        json_real(st->elapsed_s > 0 ? (double)total / st->elapsed_s : 0.0));
    json_object_set_new(root, "damage", damage);
    json_object_set_new(root, "audit", json_audit(v, checks));
    json_object_set_new(root, "points",
                        json_pack("{s:I,s:b,s:f,s:I}", "users", (json_int_t)v->user_count,
                                  "caught_up", v->points_caught_up, "wait_s", v->points_wait_s,
                                  "tickets_pending", (json_int_t)v->tickets_pending));
    json_object_set_new(root, "seats_lost", json_integer(v->seats_lost));
    json_object_set_new(root, "figures", figures);
    json_object_set_new(root, "series", json_series(st, info));
    json_object_set_new(root, "damage_details", json_msgs(&v->damage_msgs));
    {
        /* count: answers (as damage.forbidden_answers); first: examples. */
        json_t *fa = json_msgs(&v->forbidden);

        json_object_set_new(fa, "count", json_integer(v->damage[DAMAGE_FORBIDDEN_ANSWER]));
        json_object_set_new(fa, "examples", json_integer(v->forbidden.count));
        json_object_set_new(root, "forbidden_answers", fa);
    }
    json_object_set_new(root, "observations", json_msgs(&v->observations));
    json_object_set_new(root, "notes", json_msgs(&v->notes));
    json_object_set_new(root, "errors", json_msgs(&v->failures));
    json_object_set_new(root, "verdict",
                        json_string(exit_code == 2   ? "DAMAGE"
                                    : exit_code == 1 ? "ERROR"
                                                     : "NO_DAMAGE"));
    json_object_set_new(root, "exit_code", json_integer(exit_code));
    rc = json_dump_file(root, path, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(root);
    return rc == 0 ? 0 : -1;
}

int verdict_print(const struct verdict *v, const struct load_stats *st,
                  const struct verdict_run_info *info, FILE *out, const char *json_path)
{
    print_table(v, st, info, out);
    if (json_path != NULL && write_json(v, st, info, json_path) != 0) {
        fprintf(stderr, "ticketd-load: cannot write %s\n", json_path);
        return -1;
    }
    return 0;
}
