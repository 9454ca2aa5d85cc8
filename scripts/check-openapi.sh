#!/usr/bin/env bash
# Every route of service/api/routes.def is in docs/openapi.yaml, and every
# operation there is a route: the same method and path, both ways. Prints
# what is missing on either side and exits 1; run by scripts/run-tests.sh.
#
#   scripts/check-openapi.sh [routes.def] [openapi.yaml]
set -euo pipefail
cd "$(dirname "$0")/.."
DEF=${1:-service/api/routes.def}
SPEC=${2:-docs/openapi.yaml}

# "METHOD /path" for each ROUTE(...) row: the 2nd and 3rd arguments.
table=$(sed -n 's/^ROUTE([A-Z_]*, *"\([A-Z]*\)", *"\([^"]*\)".*/\1 \2/p' "$DEF" | sort)
# "METHOD /path" for each operation: a path is a key indented by two
# spaces under paths:, an operation a method key indented by four under it.
spec=$(awk '
    /^[^ #]/ { in_paths = ($0 ~ /^paths:/) ; next }
    in_paths && /^  \/[^ ]*:[ ]*$/ { path = $1; sub(/:$/, "", path); next }
    in_paths && path != "" && /^    (get|post|put|patch|delete|head|options):[ ]*$/ {
        m = $1; sub(/:$/, "", m); print toupper(m) " " path
    }' "$SPEC" | sort)

if [[ -z "$table" || -z "$spec" ]]; then
    echo "check-openapi: no routes read from $DEF or no operations from $SPEC" >&2
    exit 1
fi
missing_spec=$(comm -23 <(echo "$table") <(echo "$spec"))
missing_table=$(comm -13 <(echo "$table") <(echo "$spec"))
status=0
if [[ -n "$missing_spec" ]]; then
    echo "in $DEF but not in $SPEC:"
    echo "$missing_spec" | sed 's/^/  /'
    status=1
fi
if [[ -n "$missing_table" ]]; then
    echo "in $SPEC but not in $DEF:"
    echo "$missing_table" | sed 's/^/  /'
    status=1
fi
[[ $status -eq 0 ]] && echo "openapi: $(echo "$table" | wc -l) routes, the same in both"
exit $status
