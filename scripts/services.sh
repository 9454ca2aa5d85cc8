#!/usr/bin/env bash
# Private Redis and MariaDB servers for running and testing ticketd.
#
# Both servers live entirely under one state folder, listen on 127.0.0.1 only
# and on ports of our choosing, so they never touch (or depend on) the
# distribution's own redis-server / mariadb services or another checkout.
#
# Usage: scripts/services.sh COMMAND ...
#
#   up STATE_DIR [REDIS_PORT] [MYSQL_PORT]
#       Start both servers (or reuse the ones already running from STATE_DIR),
#       wait until they answer, create the database and its user.
#   down STATE_DIR
#       Stop both servers (SIGTERM, then SIGKILL after a bounded wait). Data stays.
#   status STATE_DIR
#       Print whether each server runs; exit 0 only if both run.
#   stop-redis | start-redis | stop-mysql | start-mysql STATE_DIR [PORT]
#       Stop or (re)start one server with the settings of `up`, for fault
#       injection. Without PORT, start-* uses the port `up` recorded.
#   pause-redis | resume-redis STATE_DIR
#       Freeze / thaw the private Redis (SIGSTOP / SIGCONT).
#   migrate [STATE_DIR]
#       Apply sql/NNN_*.sql in order, once each, recorded in schema_migrations.
#   seed [STATE_DIR]
#       Insert a demo session if there is none.
#   reset [STATE_DIR]
#       Empty every table but schema_migrations, FLUSHALL Redis (tests only).
#
# Environment:
#   TICKETD_REDIS_HOST      non-empty: use that Redis; no private one is started
#   TICKETD_REDIS_PORT      its port (default 16379)
#   TICKETD_REDIS_PASSWORD  its password, if any (reset only)
#   TICKETD_MYSQL_HOST      non-empty: use that MariaDB/MySQL; no private one
#   TICKETD_MYSQL_SOCKET    non-empty: likewise, through a Unix socket
#   TICKETD_MYSQL_PORT      port (default 13306)
#   TICKETD_MYSQL_USER, TICKETD_MYSQL_PASSWORD, TICKETD_MYSQL_DB
#                           account and database (default ticketd/ticketd/ticketd)
#   TICKETD_SERVICES_WAIT_S how long to wait for a server to answer (default 60)
#   TICKETD_SQL_DIR         migrations folder (default: sql/ of this checkout)
#
# migrate, seed and reset talk to the private MariaDB of STATE_DIR, or, when
# TICKETD_MYSQL_HOST or TICKETD_MYSQL_SOCKET is set, to that server (STATE_DIR
# may then be omitted).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/proc.sh
. "${SCRIPT_DIR}/proc.sh"
SQL_DIR=${TICKETD_SQL_DIR:-"${SCRIPT_DIR}/../sql"}
WAIT_S=${TICKETD_SERVICES_WAIT_S:-60}

DEFAULT_REDIS_PORT=16379
DEFAULT_MYSQL_PORT=13306

DB_NAME=${TICKETD_MYSQL_DB:-ticketd}
DB_USER=${TICKETD_MYSQL_USER:-ticketd}
DB_PASSWORD=${TICKETD_MYSQL_PASSWORD:-ticketd}

# ---------------------------------------------------------------------------
# Small helpers

log() { printf 'services: %s\n' "$*" >&2; }
die() {
    printf 'services: error: %s\n' "$*" >&2
    exit 1
}

usage() {
    sed -n '/^# Usage:/,/^# may then be omitted/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}



need_bin() {
    local path
    path=$(find_bin "$@") || die "'$1' not found; run scripts/deps.sh to install ticketd's packages"
    printf '%s\n' "${path}"
}

valid_port() {
    [[ "$1" =~ ^[0-9]+$ ]] && (("$1" >= 1 && "$1" <= 65535))
}


# A process counts as alive if it exists and is not a zombie: in a container

proc_stopped() {
    local state
    [[ -r "/proc/$1/stat" ]] || return 1
    state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
    [[ "${state}" == "T" ]]
}

# Print the pid recorded in PIDFILE if that process is alive and is the

tail_log() {
    local file=$1
    if [[ -s "${file}" ]]; then
        printf 'services: last lines of %s:\n' "${file}" >&2
        tail -n 25 "${file}" | sed 's/^/    /' >&2
    else
        printf 'services: (no log at %s)\n' "${file}" >&2
    fi
}

# ---------------------------------------------------------------------------
# State folder layout

STATE=""

set_state() {
    local dir=$1
    [[ -n "${dir}" ]] || die "STATE_DIR is empty"
    # shellcheck disable=SC1003 # a backslash, not an escaped quote
    case "${dir}" in
    *$'\n'* | *'"'* | *'\'*) die "STATE_DIR must not contain newlines, quotes or backslashes: ${dir}" ;;
    esac
    mkdir -p "${dir}"
    STATE=$(cd "${dir}" && pwd)

    REDIS_DIR="${STATE}/redis"
    REDIS_CONF="${REDIS_DIR}/redis.conf"
    REDIS_PID="${REDIS_DIR}/redis.pid"
    REDIS_LOG="${REDIS_DIR}/redis.log"
    REDIS_PORT_FILE="${REDIS_DIR}/port"
    # Besides its port, Redis listens here: TICKETD_REDIS_HOST=<this path>.
    REDIS_SOCK="${REDIS_DIR}/redis.sock"

    MYSQL_DIR="${STATE}/mysql"
    MYSQL_DATA="${MYSQL_DIR}/data"
    MYSQL_CNF="${MYSQL_DIR}/my.cnf"
    MYSQL_SOCK="${MYSQL_DIR}/mysqld.sock"
    MYSQL_PID="${MYSQL_DIR}/mysqld.pid"
    MYSQL_LOG="${MYSQL_DIR}/mysqld.log"
    MYSQL_PORT_FILE="${MYSQL_DIR}/port"
    # Written once the data folder is fully initialised: a data folder
    # without it is the leftover of an interrupted first start.
    MYSQL_READY_MARK="${MYSQL_DIR}/initialised"
}

# Serialise commands that start or stop servers of one state folder, so that
# `make run` and `make test` started together do not race. The servers are
# launched with this descriptor closed, or they would hold the lock forever.
take_lock() {
    command -v flock >/dev/null 2>&1 || return 0
    exec 9>"${STATE}/.services.lock"
    flock -w "${WAIT_S}" 9 || die "another services.sh holds ${STATE}/.services.lock"
}

stored_port() {
    local file=$1 port
    [[ -s "${file}" ]] || return 1
    port=$(tr -d ' \n' <"${file}")
    valid_port "${port}" || return 1
    printf '%s\n' "${port}"
}

# Port for a private server: the one given, else the one recorded by the last
# start, else the environment's, else the default.
pick_port() {
    local given=$1 file=$2 envval=$3 fallback=$4 port
    if [[ -n "${given}" ]]; then
        port=${given}
    elif port=$(stored_port "${file}"); then
        :
    elif [[ -n "${envval}" ]]; then
        port=${envval}
    else
        port=${fallback}
    fi
    valid_port "${port}" || die "invalid port: ${port}"
    printf '%s\n' "${port}"
}

redis_external() { [[ -n "${TICKETD_REDIS_HOST:-}" ]]; }
mysql_external() { [[ -n "${TICKETD_MYSQL_HOST:-}" || -n "${TICKETD_MYSQL_SOCKET:-}" ]]; }

# ---------------------------------------------------------------------------
# Redis

redis_ping() {
    local host=$1 port=$2 out
    out=$(timeout 2 "${REDIS_CLI}" -h "${host}" -p "${port}" ping 2>/dev/null) || return 1
    [[ "${out}" == "PONG" ]]
}

write_redis_conf() {
    local port=$1
    cat >"${REDIS_CONF}" <<EOF
# Private Redis for ticketd, written by scripts/services.sh.
bind 127.0.0.1
port ${port}
# Loopback only, so protected mode adds nothing but refusals.
protected-mode no
daemonize yes
pidfile "${REDIS_PID}"
logfile "${REDIS_LOG}"
dir "${REDIS_DIR}"
# For clients on this machine, a Unix socket costs less per command than TCP.
unixsocket "${REDIS_SOCK}"
unixsocketperm 700
# A cache and a lock service for ticketd: nothing here must survive a restart
# (the database decides), so no snapshots and no append-only file.
save ""
appendonly no
EOF
}

start_redis() {
    local given=${1:-} port pid old deadline
    if redis_external; then
        log "redis: TICKETD_REDIS_HOST=${TICKETD_REDIS_HOST} is set; not starting a private Redis"
        return 0
    fi
    REDIS_SERVER=$(need_bin redis-server)
    REDIS_CLI=$(need_bin redis-cli)
    mkdir -p "${REDIS_DIR}"
    # sun_path holds 108 bytes including the terminating NUL.
    if ((${#REDIS_SOCK} > 107)); then
        die "redis: socket path too long for a Unix socket (${#REDIS_SOCK} > 107): ${REDIS_SOCK}; use a shorter STATE_DIR"
    fi
    port=$(pick_port "${given}" "${REDIS_PORT_FILE}" "" "${DEFAULT_REDIS_PORT}")

    if pid=$(running_pid "${REDIS_PID}" redis-server); then
        old=$(stored_port "${REDIS_PORT_FILE}" || echo "?")
        if [[ "${old}" != "${port}" ]]; then
            die "redis: already running from ${STATE} on port ${old} (pid ${pid}), not ${port}; run 'down' first"
        fi
        # A fault-injection test that died between pause and resume must not
        # leave the next run with a Redis that never answers.
        if proc_stopped "${pid}"; then
            log "redis: pid ${pid} was paused; resuming it"
            kill -CONT "${pid}" 2>/dev/null || true
        fi
        if redis_ping 127.0.0.1 "${port}"; then
            log "redis: reusing pid ${pid} on 127.0.0.1:${port}"
            return 0
        fi
        log "redis: pid ${pid} does not answer yet; waiting"
    else
        rm -f "${REDIS_PID}"
        if port_busy "${port}"; then
            die "redis: port ${port} on 127.0.0.1 is already taken by another process; pick another port"
        fi
        write_redis_conf "${port}"
        printf '%s\n' "${port}" >"${REDIS_PORT_FILE}"
        : >>"${REDIS_LOG}"
        "${REDIS_SERVER}" "${REDIS_CONF}" </dev/null >>"${REDIS_LOG}" 2>&1 9>&- ||
            {
                tail_log "${REDIS_LOG}"
                die "redis: redis-server failed to start"
            }
    fi

    # With `daemonize yes` the parent returns at once; the pidfile appears once
    # the child has bound its port, so wait for pidfile, process and PONG.
    deadline=$(($(now_ms) + WAIT_S * 1000))
    while :; do
        if pid=$(running_pid "${REDIS_PID}" redis-server) && redis_ping 127.0.0.1 "${port}"; then
            log "redis: up, pid ${pid} on 127.0.0.1:${port}"
            return 0
        fi
        if (($(now_ms) > deadline)); then
            tail_log "${REDIS_LOG}"
            die "redis: no answer on 127.0.0.1:${port} after ${WAIT_S}s"
        fi
        sleep 0.05
    done
}

# ---------------------------------------------------------------------------
# MariaDB

mysql_root() {
    "${MARIADB}" --no-defaults --socket="${MYSQL_SOCK}" --user=root --batch --skip-column-names \
        --connect-timeout=5 "$@"
}

mysql_ping() {
    timeout 5 "${MARIADB_ADMIN}" --no-defaults --socket="${MYSQL_SOCK}" --user=root \
        --connect-timeout=2 ping >/dev/null 2>&1
}

write_mysql_cnf() {
    local port=$1
    {
        echo "# Private MariaDB for ticketd, written by scripts/services.sh."
        echo "[mysqld]"
        echo "datadir=\"${MYSQL_DATA}\""
        echo "socket=\"${MYSQL_SOCK}\""
        echo "pid-file=\"${MYSQL_PID}\""
        echo "log-error=\"${MYSQL_LOG}\""
        echo "tmpdir=\"${MYSQL_DIR}/tmp\""
        echo "port=${port}"
        echo "bind-address=127.0.0.1"
        # mariadbd refuses to run as root unless told to; CI runs as root.
        if [[ "$(id -u)" -eq 0 ]]; then
            echo "user=root"
        fi
        echo "skip-name-resolve"
        echo "character-set-server=utf8mb4"
        echo "innodb_buffer_pool_size=256M"
        echo "max_connections=500"
        # Durable commits, as in production: the tests and benchmarks must
        # measure the real cost of an order transaction.
        echo "innodb_flush_log_at_trx_commit=1"
    } >"${MYSQL_CNF}"
}

init_mysql_datadir() {
    local install_db installlog="${MYSQL_DIR}/install.log"
    local args=()
    install_db=$(need_bin mariadb-install-db mysql_install_db)
    if [[ -d "${MYSQL_DATA}" ]]; then
        log "mysql: removing the half-initialised data folder of an interrupted first start"
        rm -rf -- "${MYSQL_DATA}"
    fi
    mkdir -p "${MYSQL_DATA}"
    args=(--defaults-file="${MYSQL_CNF}" --datadir="${MYSQL_DATA}"
        --auth-root-authentication-method=normal --skip-test-db)
    if [[ "$(id -u)" -eq 0 ]]; then
        args+=(--user=root)
    fi
    log "mysql: initialising ${MYSQL_DATA}"
    if ! "${install_db}" "${args[@]}" </dev/null >"${installlog}" 2>&1 9>&-; then
        # The installer's own output is mostly advice; the server's reason
        # for refusing is in the error log.
        head -n 4 "${installlog}" | sed 's/^/    /' >&2
        tail_log "${MYSQL_LOG}"
        die "mysql: mariadb-install-db failed (full output in ${installlog})"
    fi
}

# Create the database and the account ticketd uses; safe to repeat. The
# account may also use databases named ticketd_* so tests can run in their own.
bootstrap_mysql() {
    [[ "${DB_NAME}" =~ ^[A-Za-z0-9_]+$ ]] || die "TICKETD_MYSQL_DB must match [A-Za-z0-9_]+"
    [[ "${DB_USER}" =~ ^[A-Za-z0-9_]+$ ]] || die "TICKETD_MYSQL_USER must match [A-Za-z0-9_]+"
    # shellcheck disable=SC1003 # a backslash, not an escaped quote
    case "${DB_PASSWORD}" in
    *"'"* | *'\'*) die "TICKETD_MYSQL_PASSWORD must not contain quotes or backslashes" ;;
    esac
    local host sql
    sql="CREATE DATABASE IF NOT EXISTS \`${DB_NAME}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;"
    for host in 127.0.0.1 localhost; do
        sql+="CREATE USER IF NOT EXISTS '${DB_USER}'@'${host}' IDENTIFIED BY '${DB_PASSWORD}';"
        sql+="ALTER USER '${DB_USER}'@'${host}' IDENTIFIED BY '${DB_PASSWORD}';"
        sql+="GRANT ALL PRIVILEGES ON \`${DB_NAME}\`.* TO '${DB_USER}'@'${host}';"
        sql+="GRANT ALL PRIVILEGES ON \`${DB_NAME}\\_%\`.* TO '${DB_USER}'@'${host}';"
    done
    local out
    out=$(mysql_root -e "${sql}" 2>&1) || die "mysql: creating database and user failed: ${out}"
}

start_mysql() {
    local given=${1:-} port pid old deadline bgpid
    if mysql_external; then
        log "mysql: TICKETD_MYSQL_HOST/TICKETD_MYSQL_SOCKET is set; not starting a private MariaDB"
        return 0
    fi
    MARIADBD=$(need_bin mariadbd mysqld)
    MARIADB=$(need_bin mariadb mysql)
    MARIADB_ADMIN=$(need_bin mariadb-admin mysqladmin)
    mkdir -p "${MYSQL_DIR}"
    port=$(pick_port "${given}" "${MYSQL_PORT_FILE}" "" "${DEFAULT_MYSQL_PORT}")

    # sun_path holds 108 bytes including the terminating NUL.
    if ((${#MYSQL_SOCK} > 107)); then
        die "mysql: socket path too long for a Unix socket (${#MYSQL_SOCK} > 107): ${MYSQL_SOCK}; use a shorter STATE_DIR"
    fi

    if pid=$(running_pid "${MYSQL_PID}" mariadbd || running_pid "${MYSQL_PID}" mysqld); then
        old=$(stored_port "${MYSQL_PORT_FILE}" || echo "?")
        if [[ "${old}" != "${port}" ]]; then
            die "mysql: already running from ${STATE} on port ${old} (pid ${pid}), not ${port}; run 'down' first"
        fi
        bgpid=${pid}
        if mysql_ping; then
            log "mysql: reusing pid ${pid} on 127.0.0.1:${port}"
            bootstrap_mysql
            return 0
        fi
        log "mysql: pid ${pid} does not answer yet; waiting"
    else
        rm -f "${MYSQL_PID}"
        if port_busy "${port}"; then
            die "mysql: port ${port} on 127.0.0.1 is already taken by another process; pick another port"
        fi
        mkdir -p "${MYSQL_DIR}/tmp"
        write_mysql_cnf "${port}"
        printf '%s\n' "${port}" >"${MYSQL_PORT_FILE}"
        if [[ ! -e "${MYSQL_READY_MARK}" ]]; then
            init_mysql_datadir
        fi
        : >>"${MYSQL_LOG}"
        # Its own session and no terminal, so it outlives this script and the
        # make or CI job that ran it; stdio goes to a file so that a caller
        # reading our output through a pipe is not kept waiting.
        setsid nohup "${MARIADBD}" --defaults-file="${MYSQL_CNF}" \
            </dev/null >>"${MYSQL_DIR}/mysqld.out" 2>&1 9>&- &
        bgpid=$!
    fi

    deadline=$(($(now_ms) + WAIT_S * 1000))
    while :; do
        if mysql_ping && running_pid "${MYSQL_PID}" mariadbd >/dev/null; then
            break
        fi
        if ! proc_alive "${bgpid}"; then
            tail_log "${MYSQL_LOG}"
            die "mysql: mariadbd exited during start-up"
        fi
        if (($(now_ms) > deadline)); then
            tail_log "${MYSQL_LOG}"
            die "mysql: no answer on ${MYSQL_SOCK} after ${WAIT_S}s"
        fi
        sleep 0.1
    done
    bootstrap_mysql
    : >"${MYSQL_READY_MARK}"
    pid=$(running_pid "${MYSQL_PID}" mariadbd)
    log "mysql: up, pid ${pid} on 127.0.0.1:${port}, database ${DB_NAME}, user ${DB_USER}"
}

# ---------------------------------------------------------------------------
# Stopping

# stop_server NAME PIDFILE COMM GRACE_S
stop_server() {
    local name=$1 pidfile=$2 comm=$3 grace=$4 pid deadline
    if ! pid=$(running_pid "${pidfile}" "${comm}"); then
        rm -f "${pidfile}"
        log "${name}: not running"
        return 0
    fi
    kill -TERM "${pid}" 2>/dev/null || true
    # A paused server cannot act on SIGTERM until it runs again.
    kill -CONT "${pid}" 2>/dev/null || true
    deadline=$(($(now_ms) + grace * 1000))
    while proc_alive "${pid}"; do
        if (($(now_ms) > deadline)); then
            log "${name}: pid ${pid} ignored SIGTERM for ${grace}s; sending SIGKILL"
            kill -KILL "${pid}" 2>/dev/null || true
            deadline=$(($(now_ms) + 5000))
            while proc_alive "${pid}"; do
                (($(now_ms) > deadline)) && die "${name}: pid ${pid} survived SIGKILL"
                sleep 0.1
            done
            break
        fi
        sleep 0.05
    done
    rm -f "${pidfile}"
    log "${name}: stopped pid ${pid}"
}

stop_redis() { stop_server redis "${REDIS_PID}" redis-server 10; }
stop_mysql() {
    if running_pid "${MYSQL_PID}" mysqld >/dev/null 2>&1; then
        stop_server mysql "${MYSQL_PID}" mysqld 60
    else
        stop_server mysql "${MYSQL_PID}" mariadbd 60
    fi
}

signal_redis() {
    local sig=$1 pid
    pid=$(running_pid "${REDIS_PID}" redis-server) || die "redis: no private Redis running from ${STATE}"
    kill "-${sig}" "${pid}"
    log "redis: sent SIG${sig} to pid ${pid}"
}

# ---------------------------------------------------------------------------
# Talking to the database as ticketd: migrate, seed, reset

DB_ARGS=()

# Choose the server: an external one from the environment, or the private
# MariaDB of the state folder.
db_target() {
    local state_arg=${1:-} port
    if [[ -n "${TICKETD_MYSQL_SOCKET:-}" ]]; then
        DB_ARGS=(--socket="${TICKETD_MYSQL_SOCKET}" --protocol=SOCKET)
    elif [[ -n "${TICKETD_MYSQL_HOST:-}" ]]; then
        port=${TICKETD_MYSQL_PORT:-${DEFAULT_MYSQL_PORT}}
        valid_port "${port}" || die "invalid TICKETD_MYSQL_PORT: ${port}"
        DB_ARGS=(--host="${TICKETD_MYSQL_HOST}" --port="${port}")
    else
        [[ -n "${state_arg}" ]] || die "give STATE_DIR, or set TICKETD_MYSQL_HOST or TICKETD_MYSQL_SOCKET"
        set_state "${state_arg}"
        if ! running_pid "${MYSQL_PID}" mariadbd >/dev/null && ! running_pid "${MYSQL_PID}" mysqld >/dev/null; then
            die "no private MariaDB running from ${STATE}; run 'scripts/services.sh up ${STATE}' first"
        fi
        port=$(pick_port "" "${MYSQL_PORT_FILE}" "${TICKETD_MYSQL_PORT:-}" "${DEFAULT_MYSQL_PORT}")
        DB_ARGS=(--host=127.0.0.1 --port="${port}" --protocol=TCP)
    fi
    MARIADB=$(need_bin mariadb mysql)
    # The password travels in the environment, not on a command line that
    # every local user can read in ps.
    export MYSQL_PWD="${DB_PASSWORD}"
}

db() {
    "${MARIADB}" --no-defaults "${DB_ARGS[@]}" --user="${DB_USER}" --database="${DB_NAME}" \
        --default-character-set=utf8mb4 --batch --skip-column-names --connect-timeout=5 "$@"
}

# Wait (bounded) until the server accepts our account: a migrate container may
# start before the database is ready. Wrong credentials fail at once.
db_wait() {
    local deadline out
    deadline=$(($(now_ms) + WAIT_S * 1000))
    while :; do
        if out=$(db -e 'SELECT 1' 2>&1); then
            return 0
        fi
        case "${out}" in
        *"ERROR 1044"* | *"ERROR 1045"* | *"ERROR 1049"*)
            die "cannot use database ${DB_NAME} as ${DB_USER} (${DB_ARGS[*]}): ${out}"
            ;;
        esac
        if (($(now_ms) > deadline)); then
            die "database not reachable (${DB_ARGS[*]}) after ${WAIT_S}s: ${out}"
        fi
        sleep 0.5
    done
}

cmd_migrate() {
    local out applied f base version name count=0 skipped=0
    local -A seen=()
    db_target "${1:-}"
    if [[ -n "${STATE}" ]]; then
        take_lock
    fi
    db_wait

    [[ -d "${SQL_DIR}" ]] || die "migrations folder not found: ${SQL_DIR}"
    out=$(db -e "CREATE TABLE IF NOT EXISTS schema_migrations (
            version    INT          NOT NULL PRIMARY KEY,
            name       VARCHAR(200) NOT NULL,
            applied_at DATETIME     NOT NULL
        ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin" 2>&1) ||
        die "cannot create schema_migrations: ${out}"
    applied=$(db -e 'SELECT version FROM schema_migrations' 2>&1) ||
        die "cannot read schema_migrations: ${applied}"

    # Files sort by their numeric prefix, so 010 follows 009 and 10 follows 9.
    local files=()
    while IFS= read -r f; do
        [[ -n "${f}" ]] && files+=("${f}")
    done < <(find "${SQL_DIR}" -maxdepth 1 -type f -name '[0-9]*_*.sql' -printf '%f\n' |
        LC_ALL=C sort -t_ -k1,1n)

    for base in "${files[@]}"; do
        [[ "${base}" =~ ^([0-9]+)_[A-Za-z0-9_.-]+\.sql$ ]] ||
            die "migration file name must be NNN_name.sql: ${base}"
        version=$((10#${BASH_REMATCH[1]}))
        if [[ -n "${seen[${version}]:-}" ]]; then
            die "two migrations share version ${version}: ${seen[${version}]} and ${base}"
        fi
        seen[${version}]=${base}
        if grep -qx -- "${version}" <<<"${applied}"; then
            skipped=$((skipped + 1))
            continue
        fi
        name=${base%.sql}
        # One client session: the mariadb client stops at the first failing
        # statement, so the version is recorded only when the whole file ran.
        # DDL is not transactional in MariaDB: statements before a failure
        # stay applied, which the error message says.
        if ! out=$({
            cat -- "${SQL_DIR}/${base}"
            printf '\nINSERT INTO schema_migrations (version, name, applied_at) VALUES (%d, '\''%s'\'', UTC_TIMESTAMP());\n' \
                "${version}" "${name}"
        } | db 2>&1); then
            printf '%s\n' "${out}" | sed 's/^/    /' >&2
            die "migration ${base} failed; statements before the failing one stay applied, fix the database or the file and run migrate again"
        fi
        log "migrate: applied ${base}"
        count=$((count + 1))
    done
    log "migrate: ${count} applied, ${skipped} already applied (database ${DB_NAME})"
}

cmd_seed() {
    local out
    db_target "${1:-}"
    db_wait
    out=$(db -e "INSERT INTO sessions (title, price_cents, capacity, stock)
                 SELECT 'Demo concert', 1000, 100, 100 FROM DUAL
                 WHERE NOT EXISTS (SELECT 1 FROM sessions);
                 SELECT ROW_COUNT(), (SELECT MIN(id) FROM sessions);" 2>&1) ||
        die "seed failed (did migrate run?): ${out}"
    read -r inserted first_id <<<"${out}"
    if [[ "${inserted}" == "1" ]]; then
        log "seed: created demo session ${first_id} ('Demo concert', 1000 cents, 100 seats)"
    else
        log "seed: sessions already present (first id ${first_id}); nothing inserted"
    fi
}

cmd_reset() {
    local out tables t sql host port
    db_target "${1:-}"
    db_wait
    tables=$(db -e "SELECT table_name FROM information_schema.tables
                    WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE'
                      AND table_name <> 'schema_migrations'" 2>&1) ||
        die "reset: cannot list tables: ${tables}"
    sql="SET FOREIGN_KEY_CHECKS = 0;"
    while IFS= read -r t; do
        [[ -n "${t}" ]] && sql+="TRUNCATE TABLE \`${t}\`;"
    done <<<"${tables}"
    sql+="SET FOREIGN_KEY_CHECKS = 1;"
    out=$(db -e "${sql}" 2>&1) || die "reset: truncating tables failed: ${out}"

    REDIS_CLI=$(need_bin redis-cli)
    if redis_external; then
        host=${TICKETD_REDIS_HOST}
        port=${TICKETD_REDIS_PORT:-${DEFAULT_REDIS_PORT}}
    else
        [[ -n "${STATE}" ]] || die "reset: give STATE_DIR, or set TICKETD_REDIS_HOST"
        host=127.0.0.1
        port=$(pick_port "" "${REDIS_PORT_FILE}" "${TICKETD_REDIS_PORT:-}" "${DEFAULT_REDIS_PORT}")
    fi
    if [[ -n "${TICKETD_REDIS_PASSWORD:-}" ]]; then
        export REDISCLI_AUTH="${TICKETD_REDIS_PASSWORD}"
    fi
    local where=(-h "${host}" -p "${port}")
    if [[ "${host}" == /* ]]; then
        where=(-s "${host}") # a Unix socket
    fi
    out=$(timeout 5 "${REDIS_CLI}" "${where[@]}" FLUSHALL 2>&1) || out="${out:-timeout}"
    [[ "${out}" == "OK" ]] || die "reset: FLUSHALL on ${host}:${port} failed: ${out}"
    log "reset: emptied ${DB_NAME} (schema_migrations kept) and flushed Redis ${host}:${port}"
}

cmd_status() {
    local pid port rc=0
    if redis_external; then
        log "redis: external (${TICKETD_REDIS_HOST})"
    elif pid=$(running_pid "${REDIS_PID}" redis-server); then
        port=$(stored_port "${REDIS_PORT_FILE}" || echo "?")
        if proc_stopped "${pid}"; then
            log "redis: paused, pid ${pid} on 127.0.0.1:${port}"
        else
            log "redis: running, pid ${pid} on 127.0.0.1:${port}"
        fi
    else
        log "redis: stopped"
        rc=3
    fi
    if mysql_external; then
        log "mysql: external (${TICKETD_MYSQL_HOST:-${TICKETD_MYSQL_SOCKET:-}})"
    elif pid=$(running_pid "${MYSQL_PID}" mariadbd); then
        port=$(stored_port "${MYSQL_PORT_FILE}" || echo "?")
        log "mysql: running, pid ${pid} on 127.0.0.1:${port}"
    else
        log "mysql: stopped"
        rc=3
    fi
    return "${rc}"
}

# ---------------------------------------------------------------------------

main() {
    [[ $# -ge 1 ]] || usage
    local cmd=$1
    shift
    case "${cmd}" in
    up)
        [[ $# -ge 1 && $# -le 3 ]] || usage
        set_state "$1"
        take_lock
        start_redis "${2:-}"
        start_mysql "${3:-}"
        ;;
    down)
        [[ $# -eq 1 ]] || usage
        set_state "$1"
        take_lock
        stop_redis
        stop_mysql
        ;;
    status)
        [[ $# -eq 1 ]] || usage
        set_state "$1"
        cmd_status
        ;;
    start-redis | start-mysql | stop-redis | stop-mysql)
        [[ $# -ge 1 && $# -le 2 ]] || usage
        set_state "$1"
        take_lock
        case "${cmd}" in
        start-redis) start_redis "${2:-}" ;;
        start-mysql) start_mysql "${2:-}" ;;
        stop-redis) stop_redis ;;
        stop-mysql) stop_mysql ;;
        esac
        ;;
    pause-redis | resume-redis)
        [[ $# -eq 1 ]] || usage
        set_state "$1"
        if [[ "${cmd}" == pause-redis ]]; then
            signal_redis STOP
        else
            signal_redis CONT
        fi
        ;;
    migrate)
        [[ $# -le 1 ]] || usage
        cmd_migrate "${1:-}"
        ;;
    seed)
        [[ $# -le 1 ]] || usage
        cmd_seed "${1:-}"
        ;;
    reset)
        [[ $# -le 1 ]] || usage
        cmd_reset "${1:-}"
        ;;
    -h | --help | help) usage ;;
    *)
        log "unknown command: ${cmd}"
        usage
        ;;
    esac
}

main "$@"
