/* fake_store_lifecycle.c - the lifecycle's database port
 * (store_lifecycle.h) answered from the knobs of fake_lifecycle.h. */
#include "fake_lifecycle.h"

#include "err.h"

#include <stdio.h>
#include <string.h>

struct fake_lifecycle fake_lifecycle;

void fake_lifecycle_reset(void)
{
    memset(&fake_lifecycle, 0, sizeof fake_lifecycle);
}

/* The answer for order id (or the order asked by number: id 0). */
static int answer_for(int64_t id)
{
    for (int i = 0; i < fake_lifecycle.nspecial; i++)
        if (fake_lifecycle.special_id[i] == id)
            return fake_lifecycle.special_rc[i];
    int n = fake_lifecycle.changes - 1;
    if (fake_lifecycle.nrc == 0)
        return TD_OK;
    return fake_lifecycle.rc[n < fake_lifecycle.nrc ? n : fake_lifecycle.nrc - 1];
}

int store_order_change(const struct order_change *ch, struct order *out, bool *changed)
{
    memset(out, 0, sizeof *out);
    *changed = false;
    fake_lifecycle.changes++;
    fake_lifecycle.last = *ch;
    snprintf(fake_lifecycle.order_no, sizeof fake_lifecycle.order_no, "%s",
             ch->order_no != NULL ? ch->order_no : "");
    fake_lifecycle.last.order_no = fake_lifecycle.order_no;
    int rc = answer_for(ch->order_id);
    out->id = ch->order_id;
    out->status = rc == TD_ECONFLICT ? ORDER_PAID : ch->done;
    if (rc == TD_OK && !fake_lifecycle.unchanged) {
        *changed = true;
        fake_lifecycle.moved++;
    }
    return rc;
}

int store_orders_unpaid_older(int64_t age_s, int64_t after_id, int limit, int64_t *ids, int *n)
{
    fake_lifecycle.scans++;
    fake_lifecycle.age_s = age_s;
    *n = 0;
    if (fake_lifecycle.scan_rc != TD_OK)
        return fake_lifecycle.scan_rc;
    for (int64_t id = after_id + 1; id <= fake_lifecycle.unpaid && *n < limit; id++)
        ids[(*n)++] = id;
    return TD_OK;
}
