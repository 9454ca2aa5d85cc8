/* api_me.c - the caller's own account: the points the points consumer has
 * credited for their paid orders. */
#include "api_internal.h"
#include "err.h"
#include "store_events.h"

void api_me(struct req *r, struct resp *w)
{
    int64_t points = 0;
    int rc = store_user_points(r->who.user_id, &points);
    if (rc != TD_OK) {
        api_fail(w, rc, "reading the points");
        return;
    }
    resp_json(w, 200,
              json_pack("{s:I,s:I}", "user_id", (json_int_t)r->who.user_id, "points",
                        (json_int_t)points));
}
