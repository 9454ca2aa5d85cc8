/* faults.c - the fault points of the test build (faults.h). Only
 * faults_announce unless TICKETD_FAULTS is defined. */
#include "faults.h"

#include "fiber.h"

#include "log.h"

#include <stdlib.h>

#ifdef TICKETD_FAULTS

#include "util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FAULTS_MAX 8

enum fault_mode { FAULT_CRASH, FAULT_FAIL, FAULT_DELAY, FAULT_HOLD };

struct fault {
    char name[64];
    enum fault_mode mode;
    int64_t delay_ms;
    atomic_long remaining;   /* hits left, -1 for every hit */
    atomic_llong held_until; /* faults_held: 0 none, else its MS's end */
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct fault faults[FAULTS_MAX];
static int nfaults;

static const char *mode_name(enum fault_mode m)
{
    return m == FAULT_CRASH  ? "crash"
           : m == FAULT_FAIL ? "fail"
           : m == FAULT_HOLD ? "hold"
                             : "delay";
}

/* Parses one "<name>[:mode...]" item of n bytes into f. */
static bool parse_one(const char *item, size_t n, struct fault *f)
{
    char buf[128];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, item, n);
    buf[n] = '\0';
    char *save = NULL;
    const char *name = strtok_r(buf, ":", &save);
    const char *mode = strtok_r(NULL, ":", &save);
    const char *a1 = strtok_r(NULL, ":", &save);
    const char *a2 = strtok_r(NULL, ":", &save);
    int64_t count = -1;
    if (name == NULL || strlen(name) >= sizeof f->name || strtok_r(NULL, ":", &save) != NULL)
        return false;
    if (mode == NULL || strcmp(mode, "crash") == 0) {
        if (a1 != NULL)
            return false;
        f->mode = FAULT_CRASH;
    } else if (strcmp(mode, "fail") == 0) {
        if (a2 != NULL || (a1 != NULL && !parse_i64(a1, 1, 1000000, &count)))
            return false;
        f->mode = FAULT_FAIL;
    } else if (strcmp(mode, "delay") == 0 || strcmp(mode, "hold") == 0) {
        if (a1 == NULL || !parse_i64(a1, 0, 600000, &f->delay_ms) ||
            (a2 != NULL && !parse_i64(a2, 1, 1000000, &count)))
            return false;
        f->mode = strcmp(mode, "hold") == 0 ? FAULT_HOLD : FAULT_DELAY;
    } else {
        return false;
    }
    strcpy(f->name, name);
    atomic_store(&f->remaining, count);
    return true;
}

static void load(void)
{
    const char *setting = getenv("TICKETD_FAULT");
    if (setting == NULL)
        return;
    for (const char *p = setting; *p != '\0' && nfaults < FAULTS_MAX;) {
        size_t n = strcspn(p, ",");
        if (!parse_one(p, n, &faults[nfaults])) {
            log_error("TICKETD_FAULT: '%.*s' is not "
                      "<name>[:crash|:fail[:N]|:delay:MS[:N]|:hold:MS[:N]]; "
                      "ignored",
                      (int)n, p);
        } else {
            log_warn("fault point %s armed (%s)", faults[nfaults].name,
                     mode_name(faults[nfaults].mode));
            nfaults++;
        }
        p += n;
        if (*p == ',')
            p++;
    }
}

/* Hold mode: sleeps until the file TICKETD_FAULT_RELEASE names exists
 * (looked for every 10 ms), or at most max_ms. A test releases the held
 * step when the progress it waits for has happened, not after a guess of
 * how long that takes on this machine. */
static void log_hold(const char *name, int64_t max_ms)
{
    const char *release = getenv("TICKETD_FAULT_RELEASE");
    log_warn("fault point %s: holding until %s exists (at most %lld ms)", name,
             release != NULL ? release : "(TICKETD_FAULT_RELEASE unset)", (long long)max_ms);
}

/* The release file of hold mode is there. */
static bool released(void)
{
    const char *release = getenv("TICKETD_FAULT_RELEASE");
    return release != NULL && access(release, F_OK) == 0;
}

static void hold(const char *name, int64_t max_ms)
{
    log_hold(name, max_ms);
    for (int64_t waited = 0; waited < max_ms && !released(); waited += 10)
        fiber_sleep_ms(10); /* on a request's fiber, the loop serves others meanwhile */
}

/* Takes one hit from f's budget; false when it is used up. */
static bool take_hit(struct fault *f)
{
    long left = atomic_load(&f->remaining);
    while (left != -1) {
        if (left == 0)
            return false;
        if (atomic_compare_exchange_weak(&f->remaining, &left, left - 1))
            break;
    }
    return true;
}

void faults_announce(void)
{
    pthread_once(&once, load);
}

bool faults_armed(const char *name)
{
    pthread_once(&once, load);
    for (int i = 0; i < nfaults; i++) {
        if (strcmp(name, faults[i].name) == 0 && atomic_load(&faults[i].remaining) != 0)
            return true;
    }
    return false;
}

bool faults_held(const char *name)
{
    pthread_once(&once, load);
    for (int i = 0; i < nfaults; i++) {
        struct fault *f = &faults[i];
        if (f->mode != FAULT_HOLD || strcmp(name, f->name) != 0)
            continue;
        long long until = atomic_load(&f->held_until);
        if (until == 0) {
            if (!take_hit(f))
                return false;
            until = mono_ms() + f->delay_ms;
            atomic_store(&f->held_until, until);
            log_hold(name, f->delay_ms);
        }
        if (!released() && mono_ms() < until)
            return true;
        atomic_store(&f->held_until, 0); /* released: the next hit holds anew */
        return false;
    }
    return false;
}

bool faults_hit(const char *name)
{
    pthread_once(&once, load);
    for (int i = 0; i < nfaults; i++) {
        struct fault *f = &faults[i];
        if (strcmp(name, f->name) != 0 || !take_hit(f))
            continue;
        switch (f->mode) {
        case FAULT_CRASH:
            log_warn("fault point %s: crashing", name);
            _exit(137);
        case FAULT_FAIL:
            log_warn("fault point %s: failing", name);
            return true;
        case FAULT_DELAY:
            log_warn("fault point %s: sleeping %lld ms", name, (long long)f->delay_ms);
            fiber_sleep_ms(f->delay_ms);
            break;
        case FAULT_HOLD:
            hold(name, f->delay_ms);
            break;
        }
    }
    return false;
}

#else

void faults_announce(void)
{
    const char *setting = getenv("TICKETD_FAULT");
    if (setting != NULL && setting[0] != '\0')
        log_warn("FAULT POINTS NOT COMPILED IN: TICKETD_FAULT=%s is ignored, this binary was "
                 "built without TICKETD_FAULTS; use build/faults/ticketd (make "
                 "build/faults/ticketd) or the ASan test build to inject faults",
                 setting);
}

#endif
