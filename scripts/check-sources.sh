#!/usr/bin/env bash
# check-sources.sh - three rules of service/ that the compiler does not see.
#
#   make sources-check      (run by make test through scripts/run-tests.sh)
#   scripts/check-sources.sh [ROOT]
#
#   1. No .c file under service/ is longer than MAX_LINES (500) lines. A
#      file past it is split where its code has a seam (one job per file,
#      named after it), not cut by length. Every file over is named.
#   2. A client library's header is included only in its adapter's folder,
#      so that what talks to a server, and how, stays in one place:
#        hiredis (hiredis.h, async.h, read.h, sds.h, alloc.h, adapters/, hiredis/)
#                                                  service/redis
#        MariaDB Connector/C (mysql.h, mysql/, mariadb/, errmsg.h,
#          mysqld_error.h, ma_*.h, mariadb_*.h, my_*.h)  service/mysql
#        libmicrohttpd (microhttpd*.h)             service/http
#        libcurl (curl/)                           nowhere
#      The libraries that do no I/O and are used as plain libraries are
#      allowed where they are used today, and nowhere else until a change
#      adds the folder here on purpose:
#        jansson (JSON values)                     service/model, api, jobs
#        libjwt (the API's bearer tokens)          service/api
#        OpenSSL (hashes, HMAC, random bytes)      service/base, redis
#   3. One name, one thing: no name is both a function and a type (a
#      struct, enum, union or typedef) anywhere under service/. C keeps
#      them apart, a reader does not: `db_conn` the struct and `db_conn()`
#      the call that borrows one were two things under one name. (Two
#      files' static helpers of one kind may share a name: each is local
#      to its file.) Read from clang-formatted text: a function is a name
#      followed by "(" on a line that starts in column 0; a type is a
#      struct/enum/union tag or a typedef's name.
#
#   scripts/check-sources.sh --self-test   runs the rules on a made-up tree
#                                          that breaks each, and fails unless
#                                          each is caught
#
# Prints "ok"/"FAIL" per rule, a line per breach, and a last line
# "sources: N passed, N failed"; exits 1 when a rule failed.
set -uo pipefail

MAX_LINES=500

# "LIBRARY|ALLOWED FOLDERS|HEADER REGEX" (extended regex on the name
# between the brackets or quotes).
RULES=(
    "hiredis|redis|^(hiredis\.h|async\.h|read\.h|sds\.h|alloc\.h|adapters/.*|hiredis/.*)$"
    "MariaDB Connector/C|mysql|^(mysql\.h|mysql/.*|mariadb/.*|errmsg\.h|mysqld_error\.h|ma_[a-z_]+\.h|mariadb_[a-z_]+\.h|my_[a-z_]+\.h)$"
    "libmicrohttpd|http|^microhttpd[a-z_]*\.h$"
    "libcurl||^curl/.*$"
    "jansson|model api jobs|^jansson(_config)?\.h$"
    "libjwt|api|^jwt\.h$"
    "OpenSSL|base redis|^openssl/.*$"
)

passed=0
failed=0

# $1: the checkout's root. Rule 1.
check_length() {
    local root=$1 over=0 n=0 f lines
    while IFS= read -r f; do
        n=$((n + 1))
        lines=$(wc -l <"$root/$f")
        if ((lines > MAX_LINES)); then
            echo "      $f: $lines lines (at most $MAX_LINES; split it where its code has a seam)"
            over=$((over + 1))
        fi
    done < <(cd "$root" && find service -name '*.c' | sort)
    if ((n == 0)); then
        echo "FAIL  sources: no .c file under $root/service"
        return 1
    fi
    if ((over > 0)); then
        echo "FAIL  sources: .c files under service/ over $MAX_LINES lines ($over of $n)"
        return 1
    fi
    echo "ok    sources: the $n .c files under service/ have at most $MAX_LINES lines each"
}

# $1: the checkout's root. Rule 2.
check_clients() {
    local root=$1 bad=0 n=0 file hdr folder rule lib allowed re
    while IFS=: read -r file hdr; do
        folder=${file#service/}
        folder=${folder%%/*}
        [[ $file == service/*/* ]] || folder=main
        for rule in "${RULES[@]}"; do
            lib=${rule%%|*}
            allowed=${rule#*|}
            re=${allowed#*|}
            allowed=${allowed%%|*}
            [[ $hdr =~ $re ]] || continue
            n=$((n + 1))
            if [[ " $allowed " != *" $folder "* ]]; then
                echo "      $file includes <$hdr> ($lib): only ${allowed:-no folder} may"
                bad=$((bad + 1))
            fi
        done
    done < <(cd "$root" && grep -rHoE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^>"]+[>"]' \
        --include='*.c' --include='*.h' service | sed -E 's/:[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]/:/; s/[>"]$//')
    if ((bad > 0)); then
        echo "FAIL  sources: a client library's header included outside its folder ($bad)"
        return 1
    fi
    echo "ok    sources: the $n includes of client libraries are each in their own folder"
}

# $1: the checkout's root. Rule 3.
check_names() {
    local root=$1 both n
    both=$(cd "$root" && find service -name '*.c' -o -name '*.h' | sort | xargs awk '
        /^[ \t]/ || /^#/ || /^\/\*/ || /^ \*/ { next }
        {
            line = $0
            # type tags and typedef names
            while (match(line, /(struct|enum|union)[ \t]+[A-Za-z_][A-Za-z0-9_]*[ \t]*\{/)) {
                t = substr(line, RSTART, RLENGTH); sub(/^(struct|enum|union)[ \t]+/, "", t); sub(/[ \t]*\{$/, "", t)
                type[t] = FILENAME; line = substr(line, RSTART + RLENGTH)
            }
            if ($0 ~ /^typedef/ && match($0, /[A-Za-z_][A-Za-z0-9_]*\)?(\([^()]*\))?;$/)) {
                t = $0; sub(/^.*[^A-Za-z0-9_]/, "", t); sub(/;$/, "", t)
                if (match($0, /\(\*[A-Za-z_][A-Za-z0-9_]*\)/)) { t = substr($0, RSTART + 2, RLENGTH - 3) }
                type[t] = FILENAME
            }
            if ($0 !~ /^typedef/ && match($0, /[A-Za-z_][A-Za-z0-9_]*\(/)) {
                f = substr($0, RSTART, RLENGTH - 1)
                if (f != "sizeof" && f != "__attribute__") fun[f] = FILENAME
            }
        }
        /^\} [A-Za-z_][A-Za-z0-9_]*;$/ { t = $2; sub(/;$/, "", t); type[t] = FILENAME }
        END { for (f in fun) if (f in type) printf "%s %s %s\n", f, fun[f], type[f] }')
    n=$(printf '%s\n' "$both" | grep -c . || true)
    if ((n > 0)); then
        printf '%s\n' "$both" | sort | while read -r name fn ty; do
            echo "      $name: a function ($fn) and a type ($ty)"
        done
        echo "FAIL  sources: names that are both a function and a type ($n)"
        return 1
    fi
    echo "ok    sources: no name under service/ is both a function and a type"
}

count() {
    if "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
}

# Both rules on a tree made to break each: a check that finds nothing there
# would pass anything.
self_test() {
    local tmp
    tmp=$(mktemp -d)
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" RETURN
    mkdir -p "$tmp/service/domain" "$tmp/service/redis"
    seq 1 $((MAX_LINES + 1)) | sed 's|^|// |' >"$tmp/service/domain/long.c"
    printf '#include <hiredis.h>\n' >"$tmp/service/redis/fine.c"
    printf '#include "store.h"\n#include <hiredis.h>\n' >"$tmp/service/domain/wrong.c"
    local out ok=0
    out=$(check_length "$tmp") && ok=1
    if ((ok)) || [[ $out != *"service/domain/long.c: $((MAX_LINES + 1)) lines"* ]]; then
        echo "FAIL  sources: the length rule missed a file of $((MAX_LINES + 1)) lines"
        return 1
    fi
    out=$(check_clients "$tmp") && ok=1
    if ((ok)) || [[ $out != *"service/domain/wrong.c includes <hiredis.h>"* ]] ||
        [[ $out == *"fine.c"* ]]; then
        echo "FAIL  sources: the include rule missed <hiredis.h> in service/domain, or refused it in service/redis"
        return 1
    fi
    printf 'struct thing {\n    int n;\n};\n' >"$tmp/service/domain/thing.h"
    printf 'int thing(void)\n{\n    return 0;\n}\n' >"$tmp/service/domain/thing.c"
    out=$(check_names "$tmp") && ok=1
    if ((ok)) || [[ $out != *"thing: a function"* ]]; then
        echo "FAIL  sources: the names rule missed a function named like a struct"
        return 1
    fi
    echo "ok    sources: each rule catches a made-up breach (a long file, hiredis in the domain, a function named like a struct)"
}

if [[ ${1:-} == --self-test ]]; then
    count self_test
else
    root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
    count check_length "$root"
    count check_clients "$root"
    count check_names "$root"
    count self_test
fi
echo "sources: $passed passed, $failed failed"
((failed == 0))
