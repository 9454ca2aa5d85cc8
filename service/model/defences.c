/* defences.c - TICKETD_DEFENSES read against the table of defences
 * (defences.def), and the loud line each switched-off one gets at boot.
 * Apart from boot.c so that the parser is pure and tested alone. */
#include "defences.h"

#include "err.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

static const struct {
    enum defence bit;
    const char *name;
    const char *harm; /* what gets through with it off */
} names[] = {
#define DEFENCE(id, bit, name, lesson, anchor, harm) {DEFENCE_##id, name, harm},
#include "defences.def"
#undef DEFENCE
};

#define N_NAMES (sizeof names / sizeof names[0])

const char *defence_name(enum defence d)
{
    for (size_t i = 0; i < N_NAMES; i++) {
        if (names[i].bit == d)
            return names[i].name;
    }
    return "unknown";
}

int defences_parse(const char *spec, unsigned *out, char *err, size_t cap)
{
    if (spec[0] == '\0') {
        /* An empty value is a mistake, not a wish to switch everything off. */
        snprintf(err, cap, "empty; use \"all\", \"none\" or a list");
        return TD_EINVAL;
    }
    unsigned on = spec[0] == '-' ? DEFENCES_ALL : 0;
    const char *p = spec;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        char item[32];
        if (n == 0 || n >= sizeof item) {
            snprintf(err, cap, "empty or overlong item");
            return TD_EINVAL;
        }
        memcpy(item, p, n);
        item[n] = '\0';
        p += n;
        if (*p == ',')
            p++;
        bool off = item[0] == '-';
        const char *name = off ? item + 1 : item;
        if (strcmp(name, "all") == 0) {
            on = off ? 0 : DEFENCES_ALL;
            continue;
        }
        if (strcmp(name, "none") == 0 && !off) {
            on = 0;
            continue;
        }
        unsigned bit = 0;
        for (size_t i = 0; i < N_NAMES; i++) {
            if (strcmp(names[i].name, name) == 0)
                bit = names[i].bit;
        }
        if (bit == 0) {
            snprintf(err, cap, "unknown defence '%s'", name);
            return TD_EINVAL;
        }
        on = off ? on & ~bit : on | bit;
    }
    *out = on;
    return TD_OK;
}

int defences_check_env(unsigned on, const char *env)
{
    bool any_off = false;
    for (size_t i = 0; i < N_NAMES; i++) {
        if ((on & names[i].bit) == 0) {
            any_off = true;
            log_warn("DEFENCE SWITCHED OFF: %s -- %s", names[i].name, names[i].harm);
        }
    }
    if (any_off && strcmp(env, "demo") != 0) {
        log_error("defences may only be switched off with TICKETD_ENV=demo (it is %s)", env);
        return TD_EINVAL;
    }
    return TD_OK;
}
