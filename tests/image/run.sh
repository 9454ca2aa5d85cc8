#!/usr/bin/env bash
# make test-image: ticketd's container image, built and run with its
# dependencies in containers, driven through the published port.
#
# Builds the image (scripts/image.sh: Docker or Podman; on a machine without a
# registry the Debian base images are made once with debootstrap and kept),
# and Redis and MariaDB images from the same Debian base with Debian's
# packages (tests/image/*.Dockerfile). Then, on a network of its own: MariaDB,
# Redis, the migration as a one-shot container, ticketd with the settings of
# config/ticketd.env (the env file) and the container addresses (the
# environment, which wins), its port published on 127.0.0.1. Checks: the
# image (non-root, no toolchain, a health check on /readyz), /readyz, the
# README's curl session, a retry storm (build/loadtest/ticketd-load) whose
# orders are each found once in MariaDB, the audit, the health check run, JSON
# log lines, and SIGTERM: ticketd drains and exits 0.
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

cleanup() {
    local c
    for c in ticketd migrate redis mariadb; do
        engine rm -f "${P}-${c}" >/dev/null 2>&1
    done
    engine network rm "${NET}" >/dev/null 2>&1
    engine volume rm "${VOL}" >/dev/null 2>&1
    engine rmi "${IMG}" "${REDIS_IMG}" "${MARIADB_IMG}" >/dev/null 2>&1
    say "removed containers ${P}-{ticketd,migrate,redis,mariadb}, network ${NET}, volume ${VOL}," \
        "images ${IMG} ${REDIS_IMG} ${MARIADB_IMG}; kept the base images debian:bookworm and" \
        "debian:bookworm-slim (cached for the next build)"
}

finish() {
    cleanup
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

main() {
    exec 9>/tmp/ticketd-itest.lock
    flock -n 9 || {
        say "another make test-image runs on this machine; waiting for it"
        flock 9
    }
    if ! docker_running && ! scripts/deps.sh --image; then
        say "skipped: no Docker daemon, and Podman, runc and debootstrap could not be installed (see above)"
        exit 0
    fi
    choose_engine
    say "engine: ${ENGINE[*]}; published port ${PORT}"
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
    check_storm
    check_audit
    check_health
    check_logs
    check_sigterm
    finish
}

main "$@"
