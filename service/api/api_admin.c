/* api_admin.c - the administrator's audit, GET /api/v1/admin/audit: the
 * scope from the query in, the store's consistency checks out (the checks
 * themselves live in audit_mysql.c). */
#include "api_internal.h"
#include "err.h"
#include "store_audit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ?sessions=12,13: session ids joined by commas, each a positive integer,
 * at most AUDIT_SCOPE_MAX, rewritten canonically into scope ("" when the
 * argument is absent: the whole database). False after a 400 answer. */
static bool audit_scope(struct req *r, struct resp *w, char *scope, size_t cap)
{
    const char *arg = req_query(r, "sessions");
    size_t used = 0;
    int count = 0;
    scope[0] = '\0';
    if (arg == NULL)
        return true;
    for (const char *p = arg;; count++) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        char one[24];
        int64_t id = 0;
        if (len == 0 || len >= sizeof one || count == AUDIT_SCOPE_MAX)
            goto bad;
        memcpy(one, p, len);
        one[len] = '\0';
        if (!api_parse_id(one, &id))
            goto bad;
        used += (size_t)snprintf(scope + used, cap - used, "%s%lld", count > 0 ? "," : "",
                                 (long long)id);
        if (comma == NULL)
            return true;
        p = comma + 1;
    }
bad:
    resp_problem(w, PROBLEM_VALIDATION_FAILED, "sessions",
                 "sessions must be up to %d session ids (positive integers) joined by commas",
                 AUDIT_SCOPE_MAX);
    return false;
}

/* The scope as the answer names it: null (the whole database) or the ids. */
static json_t *scope_json(const char *scope)
{
    if (scope[0] == '\0')
        return json_null();
    json_t *ids = json_array();
    for (const char *p = scope; p != NULL;) {
        json_array_append_new(ids, json_integer(strtoll(p, NULL, 10)));
        p = strchr(p, ',');
        if (p != NULL)
            p++;
    }
    return ids;
}

void api_admin_audit(struct req *r, struct resp *w)
{
    struct audit_check checks[AUDIT_MAX_CHECKS];
    char scope[AUDIT_SCOPE_SIZE];
    int n = 0;
    if (!audit_scope(r, w, scope, sizeof scope))
        return;
    int rc = store_audit(scope, checks, &n);
    if (rc != TD_OK) {
        api_fail(w, rc, "the audit");
        return;
    }
    bool all = true;
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        all = all && checks[i].ok;
        json_array_append_new(arr, json_pack("{s:s,s:b,s:s}", "name", checks[i].name, "ok",
                                             checks[i].ok, "detail", checks[i].detail));
    }
    resp_json(w, 200,
              json_pack("{s:b,s:o,s:{s:o}}", "ok", all, "checks", arr, "scope", "sessions",
                        scope_json(scope)));
}
