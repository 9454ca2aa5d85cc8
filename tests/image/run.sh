#!/usr/bin/env bash
# make test-image: ticketd's container image, built and run with its
# dependencies in containers, driven through the published port.
#
# The engine: Docker where its daemon answers or can be started. As root,
# with Debian's docker.io installed and no daemon running, the test starts
# dockerd itself (waiting, bounded, until `docker info` answers) and stops
# it at the end; a daemon that was already running is left as it was. Where
# no daemon can start, Podman.
#
# Builds the image (scripts/image.sh; on a machine without a registry the
# Debian base images are made once with debootstrap and kept), and Redis and
# MariaDB images from the same Debian base with Debian's packages
# (tests/image/*.Dockerfile). Under Docker the stack is compose.yaml itself,
# brought up with docker-compose (Debian's Compose 1.29) as a user would,
# with tests/image/compose.local.yaml putting the local images in place of
# the registry's; under Podman the same services are started one by one with
# the commands, environment and env file compose.yaml gives them. Either
# way: MariaDB, Redis, the migration as a one-shot container, ticketd with
# the settings of config/ticketd.env (the env file) and the container
# addresses (the environment, which wins), its port published on 127.0.0.1.
# Checks: the image (non-root, no toolchain, a health check on /readyz),
# /readyz, the README's curl session (step by step, then its block run as
# written), a retry storm (build/loadtest/ticketd-load) whose orders are each
# found once in MariaDB, the audit, the health check run, JSON log lines,
# and SIGTERM: ticketd drains and exits 0.
#
# Everything it creates is named ticketd-itest-* and removed at the end
# (containers, network, volume, the three images it built); the Debian base
# images stay, so the next run skips debootstrap.
#
#   TICKETD_TEST_IMAGE_PORT   published port (default 27080)
#   TICKETD_ENGINE            docker or podman (default: as scripts/image.sh)
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "${ROOT}" || exit 1
# shellcheck source=scripts/image.sh
. scripts/image.sh
set +e

P=ticketd-itest
PORT=${TICKETD_TEST_IMAGE_PORT:-27080}
URL=http://127.0.0.1:${PORT}
IMG=${P}-ticketd:latest
REDIS_IMG=${P}-redis:latest
MARIADB_IMG=${P}-mariadb:latest
NET=${P}-net
VOL=${P}-mariadb-data
LOAD=build/loadtest/ticketd-load
# Under Docker with docker-compose: the compose command for this project
# (compose.yaml with the local images), else empty (services run one by one).
COMPOSE=()
REDIS_HOST=${P}-redis
# The PID of the dockerd this test started, if it did (stopped at the end).
DOCKERD_PID=
DOCKERD_UP_MS=
DOCKERD_LOG=${ROOT}/build/image/dockerd.log
WORK=$(mktemp -d /tmp/ticketd-itest.XXXXXX)
PASSED=0
FAILED=0
T_START=$(date +%s)

say() { printf 'test-image: %s\n' "$*"; }
pass() {
    PASSED=$((PASSED + 1))
    printf 'ok   %s\n' "$*"
}
fail() {
    FAILED=$((FAILED + 1))
    printf 'FAIL %s\n' "$*"
}
check() {
    local what=$1
    shift
    if "$@"; then pass "${what}"; else fail "${what}"; fi
}

compose() { "${COMPOSE[@]}" "$@"; }

cleanup() {
    local c
    if [[ ${#COMPOSE[@]} -gt 0 ]]; then
        compose down --volumes --remove-orphans --timeout 30 >/dev/null 2>&1
    fi
    for c in ticketd migrate redis mariadb; do
        engine rm -f "${P}-${c}" >/dev/null 2>&1
    done
    engine network rm "${NET}" >/dev/null 2>&1
    engine volume rm "${VOL}" >/dev/null 2>&1
    engine rmi "${IMG}" "${REDIS_IMG}" "${MARIADB_IMG}" >/dev/null 2>&1
    local net=${NET} vol=${VOL}
    # docker-compose names them after the project: <project>_default, <project>_<volume>.
    [[ ${#COMPOSE[@]} -eq 0 ]] || net=${P}_default vol=${P}_mariadb-data
    say "removed containers ${P}-{ticketd,migrate,redis,mariadb}, network ${net}, volume ${vol}," \
        "images ${IMG} ${REDIS_IMG} ${MARIADB_IMG}; kept the base images debian:bookworm and" \
        "debian:bookworm-slim (cached for the next build)"
}

finish() {
    trap - INT TERM
    cleanup
    stop_dockerd
    rm -rf "${WORK}"
    say "took $(($(date +%s) - T_START)) s"
    printf '%d passed, %d failed\n' "${PASSED}" "${FAILED}"
    [[ ${FAILED} -eq 0 ]]
    exit
}

# A step the rest depends on: without it, stop here (and say so).
must() {
    local what=$1
    shift
    if "$@"; then
        pass "${what}"
    else
        fail "${what} (the remaining checks need it: stopping)"
        finish
    fi
}

. tests/image/checks.sh

docker_running() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }

# As root, with no daemon answering: start Debian's dockerd as its package's
# service would (default socket and storage), its log in build/image/, and
# wait, bounded by count, until it answers. False if it cannot start (a
# kernel or sandbox without what it needs): Podman then.
start_dockerd() {
    local i t0
    [[ "$(id -u)" -eq 0 ]] && command -v dockerd >/dev/null 2>&1 || return 1
    mkdir -p "$(dirname "${DOCKERD_LOG}")"
    t0=$(date +%s%N)
    dockerd --pidfile "${WORK}/dockerd.pid" >"${DOCKERD_LOG}" 2>&1 &
    DOCKERD_PID=$!
    for ((i = 0; i < 120; i++)); do
        if docker_running; then
            DOCKERD_UP_MS=$((($(date +%s%N) - t0) / 1000000))
            return 0
        fi
        kill -0 "${DOCKERD_PID}" 2>/dev/null || break
        sleep 0.5
    done
    say "dockerd did not answer (see ${DOCKERD_LOG}):"
    tail -n 5 "${DOCKERD_LOG}" | sed 's/^/  /'
    stop_dockerd
    return 1
}

# Only a daemon this test started, by its PID; its containers were removed.
stop_dockerd() {
    local i
    [[ -n "${DOCKERD_PID}" ]] || return 0
    kill -TERM "${DOCKERD_PID}" 2>/dev/null
    for ((i = 0; i < 120; i++)); do
        kill -0 "${DOCKERD_PID}" 2>/dev/null || break
        sleep 0.5
    done
    if kill -0 "${DOCKERD_PID}" 2>/dev/null; then
        say "dockerd (pid ${DOCKERD_PID}) still runs 60 s after SIGTERM; killing it"
        kill -KILL "${DOCKERD_PID}" 2>/dev/null
    fi
    wait "${DOCKERD_PID}" 2>/dev/null
    say "stopped the dockerd this test started (pid ${DOCKERD_PID})"
    DOCKERD_PID=
}

main() {
    exec 9>/tmp/ticketd-itest.lock
    flock -n 9 || {
        say "another make test-image runs on this machine; waiting for it"
        flock 9
    }
    if ! scripts/deps.sh --image && ! docker_running; then
        say "skipped: no Docker daemon, and docker.io, Podman, runc and debootstrap could not be installed (see above)"
        exit 0
    fi
    trap 'fail "interrupted"; finish' INT TERM
    if [[ "${TICKETD_ENGINE:-docker}" == docker ]] && ! docker_running && start_dockerd; then
        say "started dockerd (pid ${DOCKERD_PID}; log ${DOCKERD_LOG}): it answered after ${DOCKERD_UP_MS} ms; it is stopped at the end"
    fi
    choose_engine
    if [[ "${ENGINE_NAME}" == docker ]] && command -v docker-compose >/dev/null 2>&1; then
        COMPOSE=(docker-compose --ansi never -p "${P}" -f compose.yaml -f tests/image/compose.local.yaml)
        REDIS_HOST=redis
    fi
    say "engine: ${ENGINE[*]}${COMPOSE:+; stack: compose.yaml with $(docker-compose version --short 2>/dev/null || echo docker-compose)}; published port ${PORT}"
    cleanup >/dev/null # what an interrupted run left
    [[ -x "${LOAD}" ]] || {
        fail "${LOAD} missing (make -C loadtest)"
        finish
    }
    build_images
    check_image
    start_stack
    check_settings
    check_curl_session
    check_readme_session
    check_storm
    check_audit
    check_health
    check_logs
    check_sigterm
    finish
}

main "$@"
