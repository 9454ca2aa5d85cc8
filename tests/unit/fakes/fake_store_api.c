/* fake_store_api.c - the cart's idempotency records, the audit and the
 * points, answered from the knobs of fake_api.h. */
#include "fake_api.h"

#include "err.h"
#include "store_audit.h"
#include "store_events.h"
#include "store_idem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fake_api fake_api;

void fake_api_reset(void)
{
    memset(&fake_api, 0, sizeof fake_api);
    fake_api.idem_find_rc = TD_ENOTFOUND;
}

void idem_stored_cleanup(struct idem_stored *st)
{
    free(st->body);
    memset(st, 0, sizeof *st);
}

int store_idem_find(const char *scope, int64_t user_id, const char *key, struct idem_stored *out)
{
    (void)user_id;
    memset(out, 0, sizeof *out);
    fake_call("idem_find");
    snprintf(fake_api.idem_scope, sizeof fake_api.idem_scope, "%s", scope);
    snprintf(fake_api.idem_key, sizeof fake_api.idem_key, "%s", key);
    if (fake_api.idem_find_rc == TD_OK) {
        out->status = fake_api.idem_status;
        out->complete = fake_api.idem_complete;
    }
    return fake_api.idem_find_rc;
}

int store_idem_put(const char *scope, int64_t user_id, const char *key, const char *day,
                   const char *fingerprint, bool complete, int status, const char *body,
                   size_t body_len)
{
    (void)scope;
    (void)user_id;
    (void)key;
    (void)day;
    (void)fingerprint;
    (void)complete;
    (void)status;
    (void)body;
    (void)body_len;
    fake_call("idem_put");
    return fake_api.idem_put_rc;
}

int store_audit(const char *scope, struct audit_check *out, int *n)
{
    fake_call("audit");
    snprintf(fake_api.audit_scope, sizeof fake_api.audit_scope, "%s", scope);
    *n = 0;
    if (fake_api.audit_rc != TD_OK)
        return fake_api.audit_rc;
    out[0] = (struct audit_check){.name = "stock_conservation", .ok = true};
    *n = 1;
    return TD_OK;
}

int store_user_points(int64_t user_id, int64_t *points)
{
    (void)user_id;
    fake_call("user_points");
    *points = fake_api.points;
    return fake_api.points_rc;
}
