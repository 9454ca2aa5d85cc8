# The steps of tests/image/run.sh (sourced by it: engine, check, must, pass,
# fail and the names come from there).
# shellcheck shell=bash disable=SC2154,SC2016

ULIMIT_ARGS=(--ulimit nofile=10240:10240 --ulimit nproc=4096:4096)
TICKETD_ENV_ARGS=(--env-file config/ticketd.env
    -e TICKETD_REDIS_HOST="${P}-redis" -e TICKETD_REDIS_PORT=6379
    -e TICKETD_MYSQL_HOST="${P}-mariadb" -e TICKETD_MYSQL_PORT=3306
    -e TICKETD_MYSQL_USER=ticketd -e TICKETD_MYSQL_PASSWORD=ticketd -e TICKETD_MYSQL_DB=ticketd)

# Podman keeps no intermediate images with --layers=false, so removing the
# three tagged images by name removes all the test built.
build_side() {
    local tag=$1 file=$2 args=()
    [[ "${ENGINE_NAME}" == podman ]] && args=(--format docker --layers=false "${ULIMIT_ARGS[@]}")
    engine build "${args[@]}" -f "${file}" -t "${tag}" . >"${WORK}/build-${tag%%:*}.log" 2>&1 || {
        tail -n 20 "${WORK}/build-${tag%%:*}.log"
        return 1
    }
}

build_images() {
    local out rc
    # shellcheck disable=SC2034 # read by build (scripts/image.sh)
    [[ "${ENGINE_NAME}" == podman ]] && IMAGE_BUILD_ARGS=--layers=false
    out=$( (build "${IMG}") 2>&1)
    rc=$?
    printf '%s\n' "${out}" | grep -E '^image: ' | grep -v '^image: error' | sed 's/^/  /'
    if [[ ${rc} -ne 0 ]]; then
        printf '%s\n' "${out}" | tail -n 30
        fail "scripts/image.sh build ${IMG} (the remaining checks need it: stopping)"
        finish
    fi
    pass "image ${IMG} built ($(printf '%s\n' "${out}" | grep -o 'built in [0-9]* s.*'))"
    must "Redis image from Debian's redis-server (tests/image/redis.Dockerfile)" \
        build_side "${REDIS_IMG}" tests/image/redis.Dockerfile
    must "MariaDB image from Debian's mariadb-server (tests/image/mariadb.Dockerfile)" \
        build_side "${MARIADB_IMG}" tests/image/mariadb.Dockerfile
}

# --- the image itself ---------------------------------------------------------

image_user_not_root() {
    local user uid
    user=$(engine image inspect --format '{{.Config.User}}' "${IMG}") || return 1
    uid=$(engine run --rm "${ULIMIT_ARGS[@]}" "${IMG}" id -u 2>/dev/null) || return 1
    echo "  USER ${user}, uid ${uid}"
    [[ -n "${user}" && "${user}" != root && "${uid}" =~ ^[0-9]+$ && "${uid}" -ne 0 ]]
}

# No compiler, linker, make or -dev package: the build stage stayed behind.
image_runtime_only() {
    local found
    found=$(engine run --rm "${ULIMIT_ARGS[@]}" "${IMG}" sh -c \
        'for b in cc gcc c99 ld make pkg-config; do command -v "$b"; done;
         dpkg-query -W -f "\${Package}\n" | grep -e "-dev$" -e "^build-essential$"' 2>/dev/null)
    [[ -z "${found}" ]] || echo "  found: ${found//$'\n'/ }"
    [[ -z "${found}" ]]
}

image_healthcheck_readyz() {
    local hc
    hc=$(engine image inspect --format '{{json .Config.Healthcheck}}' "${IMG}") || return 1
    echo "  HEALTHCHECK ${hc}"
    [[ "${hc}" == *"/readyz"* ]]
}

check_image() {
    check "the image runs as a non-root user" image_user_not_root
    check "the image holds no toolchain or -dev package" image_runtime_only
    check "the image's HEALTHCHECK calls /readyz (kept: Docker image format)" image_healthcheck_readyz
}

# --- the stack ------------------------------------------------------------------

# Podman without systemd says on stderr that it cannot schedule health
# checks (check_health runs one by hand): kept in a file, shown on failure.
quiet() {
    local log="${WORK}/$1.err"
    shift
    "$@" >/dev/null 2>"${log}" || {
        sed 's/^/  /' "${log}"
        return 1
    }
}

run_mariadb() {
    quiet mariadb engine run -d --name "${P}-mariadb" --network "${NET}" -v "${VOL}:/var/lib/mysql" \
        "${ULIMIT_ARGS[@]}" -e MARIADB_DATABASE=ticketd -e MARIADB_USER=ticketd \
        -e MARIADB_PASSWORD=ticketd "${MARIADB_IMG}" --character-set-server=utf8mb4 --skip-name-resolve --max-connections=500 \
        --innodb-buffer-pool-size=256M
}

run_redis() {
    quiet redis engine run -d --name "${P}-redis" --network "${NET}" "${ULIMIT_ARGS[@]}" "${REDIS_IMG}"
}

# The one-shot migration, as compose.yaml's migrate service runs it (no
# health check: it serves no HTTP); it waits (bounded) for MariaDB to accept
# the account.
run_migrate() {
    engine run --name "${P}-migrate" --network "${NET}" --no-healthcheck "${ULIMIT_ARGS[@]}" \
        "${TICKETD_ENV_ARGS[@]}" "${IMG}" /app/scripts/services.sh migrate >"${WORK}/migrate.log" 2>&1
    local rc=$?
    sed 's/^/  /' "${WORK}/migrate.log" | tail -n 8
    engine rm -f "${P}-migrate" >/dev/null 2>&1
    return "${rc}"
}

run_ticketd() {
    quiet ticketd engine run -d --name "${P}-ticketd" --network "${NET}" -p "127.0.0.1:${PORT}:8080" \
        "${ULIMIT_ARGS[@]}" "${TICKETD_ENV_ARGS[@]}" -e TICKETD_BIND=0.0.0.0 -e TICKETD_PORT=8080 \
        "${IMG}"
}

# Bounded by count: 120 probes, half a second apart at least.
wait_ready() {
    local i
    for ((i = 0; i < 120; i++)); do
        if curl -fsS -o /dev/null --max-time 2 "${URL}/readyz" 2>/dev/null; then
            return 0
        fi
        [[ "$(engine inspect --format '{{.State.Running}}' "${P}-ticketd" 2>/dev/null)" == true ]] ||
            break
        sleep 0.5
    done
    engine logs "${P}-ticketd" 2>&1 | tail -n 20
    return 1
}

# The stack from compose.yaml itself, as a user starts it, with the local
# images in place of the registry's (tests/image/compose.local.yaml); up
# returns once MariaDB and Redis are healthy, the migration exited 0 and
# ticketd started, or fails.
compose_up() {
    TICKETD_PUBLISH=127.0.0.1:${PORT} compose up -d --no-build >"${WORK}/compose-up.log" 2>&1 || {
        tail -n 20 "${WORK}/compose-up.log" | sed 's/^/  /'
        compose ps 2>&1 | sed 's/^/  /'
        compose logs --no-color mariadb migrate 2>&1 | tail -n 20 | sed 's/^/  /'
        return 1
    }
    grep -E '^Creating (network|volume) |^(Creating|Starting) .* done$' "${WORK}/compose-up.log" |
        tr -s ' ' | sed 's/^/  /'
    return 0
}

migrate_exited_0() {
    local code
    code=$(engine inspect --format '{{.State.ExitCode}}' "${P}-migrate") || return 1
    compose logs --no-color migrate 2>/dev/null | tail -n 4 | sed 's/^/  /'
    [[ "${code}" == 0 ]]
}

start_stack() {
    if [[ ${#COMPOSE[@]} -gt 0 ]]; then
        must "docker-compose up: compose.yaml's stack (images: tests/image/compose.local.yaml), port 127.0.0.1:${PORT}" \
            compose_up
        must "compose.yaml's one-shot migrate service applied the migrations and exited 0" migrate_exited_0
        must "GET /readyz 200 through the published port" wait_ready
        return
    fi
    must "network ${NET}" engine network create "${NET}" >/dev/null
    must "volume ${VOL}" engine volume create "${VOL}" >/dev/null
    must "MariaDB container started" run_mariadb
    must "Redis container started" run_redis
    must "migrations applied by a one-shot ticketd container (services.sh migrate)" run_migrate
    must "ticketd container started, port 127.0.0.1:${PORT} published" run_ticketd
    must "GET /readyz 200 through the published port" wait_ready
}

# The start-up log names every effective setting: TICKETD_ENV=dev only comes
# from the env file (the image's default is production); TICKETD_BIND and the
# Redis host come from the environment, which wins over the file.
check_settings() {
    local logs
    logs=$(engine logs "${P}-ticketd" 2>/dev/null)
    check "settings from the env file (TICKETD_ENV=dev)" \
        grep -q '"config TICKETD_ENV=dev"' <<<"${logs}"
    check "the environment wins over the env file (TICKETD_BIND=0.0.0.0, TICKETD_REDIS_HOST=${REDIS_HOST})" \
        bash -c 'grep -q "\"config TICKETD_BIND=0.0.0.0\"" <<<"$1" &&
                 grep -q "\"config TICKETD_REDIS_HOST=$2\"" <<<"$1"' _ "${logs}" "${REDIS_HOST}"
}

# --- the README's curl session -------------------------------------------------

token() { engine exec "${P}-ticketd" ticketd token "$@"; }

# post_order FILE KEY TOKEN BODY: the README's order request, its answer
# (status line, headers, body; CRs dropped) saved in FILE.
post_order() {
    curl -si -XPOST "${URL}/api/v1/orders" -H "Authorization: Bearer ${T}" \
        -H 'Content-Type: application/json' -H "Idempotency-Key: $2" -H "X-Order-Token: $3" \
        -d "$4" | tr -d '\r' >"$1"
}

# answer_is FILE STATUS [CODE]: the status line, and the problem code if given.
answer_is() {
    head -n 1 "$1" | grep -q "^HTTP/1.1 $2 " || return 1
    [[ -z "${3:-}" ]] || grep -q "\"code\":\"$3\"" "$1"
}

body_order_no() { sed -n '/^{/p' "$1" | jq -r .order_no; }

check_curl_session() {
    local A SID TOK KEY NO o="${WORK}/curl"
    T=$(token --user 42) && A=$(token --user 1 --admin)
    check "ticketd token in the container" test -n "${T}" -a -n "${A}"
    SID=$(curl -s -XPOST "${URL}/api/v1/sessions" -H "Authorization: Bearer ${A}" \
        -H 'Content-Type: application/json' \
        -d '{"title":"Night show","price_cents":1000,"stock":100}' | jq -r .id)
    check "POST /sessions: id ${SID}" test "${SID}" -gt 0 2>/dev/null
    TOK=$(curl -s -XPOST "${URL}/api/v1/tokens" -H "Authorization: Bearer ${T}" | jq -r .token)
    KEY=buy-$(date +%s%N)
    post_order "${o}1" "${KEY}" "${TOK}" "{\"session_id\":${SID},\"quantity\":2}"
    NO=$(body_order_no "${o}1")
    check "POST /orders: 201, order_no ${NO}" \
        bash -c '[[ "$(head -n 1 "$1")" == "HTTP/1.1 201 "* && "$2" =~ ^[0-9]{20}$ ]]' _ "${o}1" "${NO}"
    post_order "${o}2" "${KEY}" "${TOK}" "{\"session_id\":${SID},\"quantity\":2}"
    check "the same request again: 201 replayed, the same order" \
        bash -c '[[ "$(head -n 1 "$1")" == "HTTP/1.1 201 "* && "$3" == "$2" ]] &&
                 grep -qi "^Idempotent-Replayed: true" "$1"' _ "${o}2" "${NO}" "$(body_order_no "${o}2")"
    post_order "${o}3" "${KEY}" "${TOK}" "{\"session_id\":${SID},\"quantity\":3}"
    check "the same key, another payload: 422 IDEMPOTENCY_KEY_REUSED" \
        answer_is "${o}3" 422 IDEMPOTENCY_KEY_REUSED
    post_order "${o}4" "${KEY}-2" "${TOK}" "{\"session_id\":${SID},\"quantity\":2}"
    check "another key, the spent token: 409 ORDER_TOKEN_INVALID" \
        answer_is "${o}4" 409 ORDER_TOKEN_INVALID
}

# The README's session block itself (the ```sh block under "A session with
# curl"), run by bash against the published port, with one change: the
# tokens come from `ticketd token` in the container (the same env file, so
# the same secret) instead of build/release/ticketd on the host. Each
# "# HTTP/1.1 NNN" comment in the block says what the curl -si before it
# answers: the status lines printed must be those, in that order.
readme_session() {
    local block="${WORK}/readme-session.sh" out="${WORK}/readme-session.out" want got
    awk '/^## A session with curl/ { s = 1 } s && /^```sh$/ { b = 1; next } b && /^```$/ { exit } b' \
        README.md >"${block}"
    if ! grep -q '^U=http://127.0.0.1:8080$' "${block}" ||
        ! grep -q 'build/release/ticketd token --config \$C' "${block}"; then
        echo "  README.md's session block no longer sets U=http://127.0.0.1:8080 and calls build/release/ticketd token"
        return 1
    fi
    sed -i -e "s|^U=http://127.0.0.1:8080\$|U=${URL}|" \
        -e "s|build/release/ticketd token --config \\\$C|${ENGINE[*]} exec ${P}-ticketd ticketd token|" "${block}"
    if ! bash -e -o pipefail "${block}" >"${out}" 2>&1; then
        tail -n 10 "${out}" | sed 's/^/  /'
        return 1
    fi
    want=$(sed -n 's/^# HTTP\/1\.1 \([0-9]\{3\}\).*/\1/p' "${block}" | paste -sd' ' -)
    got=$(tr -d '\r' <"${out}" | sed -n 's/^HTTP\/1\.1 \([0-9]\{3\}\).*/\1/p' | paste -sd' ' -)
    echo "  statuses the README promises: ${want}; answered: ${got}"
    [[ -n "${want}" && "${got}" == "${want}" ]]
}

check_readme_session() {
    check "README.md's curl session block, run as written against the published port" readme_session
}

# --- the storm, the audit ---------------------------------------------------------

STORM_KEYS=40

db_query() {
    engine exec -e MYSQL_PWD=ticketd "${P}-mariadb" mariadb --no-defaults -h 127.0.0.1 -u ticketd \
        ticketd --batch --skip-column-names -e "$1"
}

# Every order_no a client got (created or replayed) is one row in MariaDB, and
# there is one per key: as many distinct order numbers as keys.
storm_orders_in_db() {
    local out="${WORK}/storm-orders" distinct list rows
    distinct=$(sort -u "${out}" | wc -l)
    list=$(sort -u "${out}" | grep -E '^[0-9]{20}$' | sed "s/.*/'&'/" | paste -sd, -)
    rows=$(db_query "SELECT COUNT(*) FROM orders WHERE order_no IN (${list:-''})") || return 1
    echo "  ${distinct} distinct order numbers answered for ${STORM_KEYS} keys; ${rows} rows in MariaDB"
    [[ "${distinct}" -eq "${STORM_KEYS}" && "${rows}" -eq "${STORM_KEYS}" ]]
}

check_storm() {
    local rc
    "${LOAD}" retry-storm --target "${URL}" --config config/ticketd.env --rounds "${STORM_KEYS}" \
        --copies 16 --concurrency 32 --requests 4000 --duration 30 \
        --orders-out "${WORK}/storm-orders" >"${WORK}/storm.log" 2>&1
    rc=$?
    grep -E '^(requests|orders created|replays|transport errors|server errors|without a definite)|verdict' \
        "${WORK}/storm.log" | sed 's/^/  /'
    check "retry storm: ${STORM_KEYS} keys x 16 concurrent identical orders, no damage (ticketd-load exit ${rc})" \
        test "${rc}" -eq 0
    [[ ${rc} -eq 0 ]] || tail -n 30 "${WORK}/storm.log"
    check "each key's order is one row in MariaDB" storm_orders_in_db
}

audit_ok() {
    local A body
    A=$(token --user 1 --admin) || return 1
    body=$(curl -s "${URL}/api/v1/admin/audit" -H "Authorization: Bearer ${A}")
    jq -e '.ok == true' >/dev/null <<<"${body}" || {
        echo "  ${body}"
        return 1
    }
}

check_audit() {
    check "GET /api/v1/admin/audit: ok" audit_ok
}

# --- the health check, the logs, SIGTERM ----------------------------------------

# Podman runs health checks from systemd timers, which a machine without
# systemd lacks: run the image's check once by hand. Docker runs it on its
# own: wait (bounded) until it reports healthy.
health_ok() {
    if [[ "${ENGINE_NAME}" == podman ]]; then
        engine healthcheck run "${P}-ticketd" >/dev/null 2>&1
        return
    fi
    local i
    for ((i = 0; i < 60; i++)); do
        [[ "$(engine inspect --format '{{.State.Health.Status}}' "${P}-ticketd")" == healthy ]] &&
            return 0
        sleep 1
    done
    return 1
}

# stdout is the JSON log: every line one object, access lines among them.
logs_json() {
    local logs bad
    logs=$(engine logs "${P}-ticketd" 2>/dev/null)
    bad=$(grep -cv '^{.*}$' <<<"${logs}")
    echo "  $(wc -l <<<"${logs}") lines on stdout, ${bad} not JSON objects"
    jq -e -s 'length > 0 and all(type == "object")' >/dev/null <<<"${logs}" &&
        grep -q '"msg":"access"' <<<"${logs}"
}

# Under Compose as a user stops it (`docker-compose stop`: SIGTERM, then
# SIGKILL after compose.yaml's stop_grace_period, which would exit 137).
sigterm_exit_0() {
    local code
    if [[ ${#COMPOSE[@]} -gt 0 ]]; then
        timeout 60 "${COMPOSE[@]}" stop ticketd >/dev/null 2>&1 || return 1
        code=$(engine inspect --format '{{.State.ExitCode}}' "${P}-ticketd") || return 1
    else
        engine kill --signal TERM "${P}-ticketd" >/dev/null || return 1
        code=$(timeout 60 "${ENGINE[@]}" wait "${P}-ticketd") || return 1
    fi
    echo "  exit code ${code}"
    [[ "${code}" == 0 ]]
}

check_health() {
    check "the container's health check (/readyz) passes" health_ok
}

check_logs() {
    check "the container logs JSON lines to stdout" logs_json
}

check_sigterm() {
    check "SIGTERM: ticketd drains and exits 0" sigterm_exit_0
}
