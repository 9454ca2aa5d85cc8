/* faults.c - the fault points of the test build (faults.h). Empty unless
 * TICKETD_FAULTS is defined. */
#include "faults.h"

#ifdef TICKETD_FAULTS

#include "log.h"
#include "util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum fault_mode { FAULT_CRASH, FAULT_FAIL };

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char armed[64];
static enum fault_mode mode = FAULT_CRASH;
static atomic_long remaining = -1; /* fail mode: hits left, -1 for every hit */

static void load(void)
{
    const char *setting = getenv("TICKETD_FAULT");
    if (setting == NULL || setting[0] == '\0')
        return;
    size_t n = strcspn(setting, ":");
    if (n == 0 || n >= sizeof armed) {
        log_error("TICKETD_FAULT=%s: not <name>[:crash|:fail[:N]]; ignored", setting);
        return;
    }
    const char *m = setting[n] == ':' ? setting + n + 1 : "crash";
    int64_t count = -1;
    if (strcmp(m, "crash") == 0) {
        mode = FAULT_CRASH;
    } else if (strcmp(m, "fail") == 0) {
        mode = FAULT_FAIL;
    } else if (strncmp(m, "fail:", 5) == 0 && parse_i64(m + 5, 1, 1000000, &count)) {
        mode = FAULT_FAIL;
    } else {
        log_error("TICKETD_FAULT=%s: not <name>[:crash|:fail[:N]]; ignored", setting);
        return;
    }
    memcpy(armed, setting, n);
    armed[n] = '\0';
    atomic_store(&remaining, count);
    log_warn("fault point %s armed (%s)", armed, mode == FAULT_CRASH ? "crash" : "fail");
}

bool faults_hit(const char *name)
{
    pthread_once(&once, load);
    if (armed[0] == '\0' || strcmp(name, armed) != 0)
        return false;
    if (mode == FAULT_CRASH) {
        log_warn("fault point %s: crashing", name);
        _exit(137);
    }
    long left = atomic_load(&remaining);
    while (left != -1) {
        if (left == 0)
            return false;
        if (atomic_compare_exchange_weak(&remaining, &left, left - 1))
            break;
    }
    log_warn("fault point %s: failing", name);
    return true;
}

#else

/* ISO C wants at least one declaration in a translation unit. */
typedef int faults_disabled;

#endif
