/* fake_keys.c - the key look-up's read-only ports, answered from the
 * knobs of fake_keys.h. */
#include "fake_keys.h"

#include "cache.h"
#include "err.h"
#include "store.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

struct fake_keys fake_keys;

void fake_keys_reset(void)
{
    memset(&fake_keys, 0, sizeof fake_keys);
    fake_keys.order_rc = TD_ENOTFOUND;
    fake_keys.ttl_ms[0] = fake_keys.ttl_ms[1] = -1;
}

int cache_idem_peek(int64_t user_id, const char *name1, const char *name2, struct idem_peek out[2])
{
    (void)user_id;
    fake_call("idem_peek");
    snprintf(fake_keys.names[0], sizeof fake_keys.names[0], "%s", name1);
    snprintf(fake_keys.names[1], sizeof fake_keys.names[1], "%s", name2);
    for (int i = 0; i < 2; i++) {
        out[i] = (struct idem_peek){.record = NULL, .len = 0, .ttl_ms = -1};
        if (fake_keys.peek_rc != TD_OK || fake_keys.records[i][0] == '\0')
            continue;
        out[i].record = xstrdup(fake_keys.records[i]);
        out[i].len = strlen(fake_keys.records[i]);
        out[i].ttl_ms = fake_keys.ttl_ms[i];
    }
    return fake_keys.peek_rc;
}

int store_order_peek_request(int64_t user_id, const char *request_id, struct order *out)
{
    (void)user_id;
    fake_call("order_peek");
    snprintf(fake_keys.request_id, sizeof fake_keys.request_id, "%s", request_id);
    memset(out, 0, sizeof *out);
    if (fake_keys.order_rc == TD_OK)
        *out = fake_keys.order;
    return fake_keys.order_rc;
}
