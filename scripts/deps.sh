#!/usr/bin/env bash
# Make sure the Debian packages a make target needs are installed: the demo
# only what it runs, the tests and benchmarks what they drive besides.
#
#   scripts/deps.sh [GROUP]    check GROUP's packages; install what is missing
#                              (root) or print the exact command to do it
#                              (exit 1). GROUP is one of
#                                run    make run: the build, Redis, MariaDB,
#                                       and curl and jq for the README's session
#                                demo   make demo: run's, the load tool
#                                       (libcurl) and gnuplot for its charts
#                                bench  make bench: demo's and wrk
#                                lab    make lab, make lesson: run's, the load
#                                       tool, Python and the charts the page
#                                       serves offline
#                                test   make test (the default): all of the
#                                       above, and what only the tests drive:
#                                       cmocka, clang-format, libFuzzer,
#                                       Valgrind, nginx, Chromium, Node.js,
#                                       Prometheus
#   scripts/deps.sh GROUP --cluster
#                              the same, plus what `make test-cluster` and
#                              the galera-* lessons need: Galera, mariabackup
#                              (its state transfer), socat (which mariabackup
#                              streams through) and Redis Sentinel
#   scripts/deps.sh GROUP --image
#                              the same, plus what `make test-image` needs:
#                              docker-compose (the stack from compose.yaml
#                              under Docker), Podman with runc and
#                              podman-compose where Docker's daemon cannot
#                              start, and debootstrap (base images where no
#                              registry answers)
#   scripts/deps.sh --list GROUP [--cluster|--image]
#                              print the packages, one a line, and stop
#                              (tests/deps/test_deps.sh reads it)
#   TICKETD_SKIP_DEPS=1        skip the check (image builds that install their
#                              own, smaller set of packages)
#
# When everything is present this is one dpkg-query call, so `make` can run it
# every time. It never starts, stops or configures the distribution's Redis or
# MariaDB services: ticketd runs private servers of its own (scripts/services.sh).
set -euo pipefail

# make run: build ticketd, run its private Redis and MariaDB (services.sh),
# and the README's session (curl, jq).
RUN_PACKAGES=(
    build-essential
    pkg-config
    libmicrohttpd-dev
    libhiredis-dev
    libmariadb-dev
    libjansson-dev
    libjwt-dev
    libssl-dev
    mariadb-server
    mariadb-client
    redis-server
    curl
    jq
)
# make demo: the load tool (loadtest/, libcurl) and its report's charts.
DEMO_PACKAGES=(
    libcurl4-openssl-dev
    gnuplot-nox
)
# make bench: wrk drives the rows the load tool does not.
BENCH_PACKAGES=(
    wrk
)
# the replay lab (lab/): its program, the load tool it drives, and the
# charts it serves offline.
LAB_PACKAGES=(
    libcurl4-openssl-dev
    python3
    libjs-chart.js
)
# What only the tests use: the unit tests' framework, the format check, the
# fuzz harnesses, Valgrind, the proxy test's nginx, the headless browser of
# the lab's test, Node.js for the OpenAPI linter (tools/openapi/,
# scripts/lint-openapi.sh; npm below), and Prometheus's promtool and the
# server the scrape test starts.
TEST_PACKAGES=(
    libcmocka-dev
    clang-format
    clang-14
    libfuzzer-14-dev
    valgrind
    nginx
    chromium
    nodejs
    prometheus
)

# Only `make test-cluster` and the galera-* lessons need these: most
# checkouts never start a cluster.
CLUSTER_PACKAGES=(
    galera-4
    mariadb-backup
    socat
    redis-sentinel
)
# Only `make test-image` needs these.
IMAGE_PACKAGES=(
    # Docker's daemon and Compose 1.29 (docker-compose, which reads
    # compose.yaml); Podman where the daemon cannot start
    docker.io
    docker-compose
    podman
    # Podman 4.3 on Debian 12 uses CNI networks: without this plugin a
    # container cannot resolve another by name (ticketd's container would
    # not find "ticketd-itest-mariadb"), and apt leaves it out as a mere
    # recommendation.
    golang-github-containernetworking-plugin-dnsname
    runc
    podman-compose
    debootstrap
)

usage() {
    echo "usage: scripts/deps.sh [--list] [run|demo|bench|lab|test] [--cluster|--image]" >&2
    exit 2
}

list=0
group=test
extra=""
for arg in "$@"; do
    case "${arg}" in
    --list) list=1 ;;
    run | demo | bench | lab | test) group=${arg} ;;
    --cluster | --image) extra=${arg} ;;
    *) usage ;;
    esac
done

PACKAGES=("${RUN_PACKAGES[@]}")
case "${group}" in
demo) PACKAGES+=("${DEMO_PACKAGES[@]}") ;;
bench) PACKAGES+=("${DEMO_PACKAGES[@]}" "${BENCH_PACKAGES[@]}") ;;
lab) PACKAGES+=("${LAB_PACKAGES[@]}") ;;
test) PACKAGES+=("${DEMO_PACKAGES[@]}" "${BENCH_PACKAGES[@]}" "${LAB_PACKAGES[@]}"
    "${TEST_PACKAGES[@]}") ;;
esac
# npm comes with Node.js from some other sources, which conflict with
# Debian's npm package: wanted only where no npm is on PATH yet.
if [[ "${group}" == test ]] && ! command -v npm >/dev/null 2>&1; then
    PACKAGES+=(npm)
fi
case "${extra}" in
--cluster) PACKAGES+=("${CLUSTER_PACKAGES[@]}") ;;
--image) PACKAGES+=("${IMAGE_PACKAGES[@]}") ;;
esac
# Each once, in the order given (lab and demo share the load tool's).
mapfile -t PACKAGES < <(printf '%s\n' "${PACKAGES[@]}" | awk '!seen[$0]++')

if [[ ${list} -eq 1 ]]; then
    printf '%s\n' "${PACKAGES[@]}"
    exit 0
fi

if [[ "${TICKETD_SKIP_DEPS:-0}" == "1" ]]; then
    exit 0
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps: dpkg-query not found; ticketd's scripts expect Debian 12 (bookworm)." >&2
    echo "deps: install the equivalents of: ${PACKAGES[*]}" >&2
    exit 1
fi

# One query for all packages. Unknown packages print nothing on stdout (only a
# complaint on stderr, which we drop), so anything not reported as
# "install ok installed" counts as missing.
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>/dev/null || true)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! grep -qx -- "${pkg} install ok installed" <<<"${installed}"; then
        missing+=("${pkg}")
    fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
    exit 0
fi

cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"

if [[ "$(id -u)" -ne 0 ]]; then
    echo "deps: missing Debian packages: ${missing[*]}" >&2
    echo "deps: install them as root, then run make again:" >&2
    echo "" >&2
    echo "    sudo sh -c '${cmd}'" >&2
    echo "" >&2
    exit 1
fi

echo "deps: installing missing Debian packages: ${missing[*]}" >&2
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"

# Check again, so a package that apt silently skipped is reported here and not
# as a confusing compiler or linker error later.
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${missing[@]}" 2>/dev/null || true)
still=()
for pkg in "${missing[@]}"; do
    if ! grep -qx -- "${pkg} install ok installed" <<<"${installed}"; then
        still+=("${pkg}")
    fi
done
if [[ ${#still[@]} -ne 0 ]]; then
    echo "deps: still missing after apt-get install: ${still[*]}" >&2
    exit 1
fi
echo "deps: all packages installed" >&2
