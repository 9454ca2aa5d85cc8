#!/usr/bin/env bash
# Make sure the Debian packages ticketd needs to build, test and benchmark are
# installed.
#
#   scripts/deps.sh            check; install what is missing (root) or print
#                              the exact command to do it (exit 1)
#   scripts/deps.sh --cluster  the same, plus what `make test-cluster` needs:
#                              Galera, mariabackup (its state transfer),
#                              socat (which mariabackup streams through) and
#                              Redis Sentinel
#   scripts/deps.sh --image    the same, plus what `make test-image` needs:
#                              docker-compose (the stack from compose.yaml
#                              under Docker), Podman with runc and
#                              podman-compose where Docker's daemon cannot
#                              start, and debootstrap (base images where no
#                              registry answers)
#   TICKETD_SKIP_DEPS=1        skip the check (image builds that install their
#                              own, smaller set of packages)
#
# When everything is present this is one dpkg-query call, so `make` can run it
# every time. It never starts, stops or configures the distribution's Redis or
# MariaDB services: ticketd runs private servers of its own (scripts/services.sh).
set -euo pipefail

PACKAGES=(
    build-essential
    pkg-config
    libmicrohttpd-dev
    libhiredis-dev
    libmariadb-dev
    mariadb-server
    mariadb-client
    redis-server
    nginx
    libjansson-dev
    libcmocka-dev
    libjwt-dev
    libcurl4-openssl-dev
    libssl-dev
    curl
    jq
    python3
    wrk
    gnuplot-nox
    # the replay lab (lab/): its program, the charts it serves offline, and
    # the headless browser its test drives
    python3
    libjs-chart.js
    chromium
    clang-format
    clang-14
    libfuzzer-14-dev
    valgrind
    # the conventions' own tools in make test: Node.js runs the OpenAPI
    # linter (tools/openapi/, scripts/lint-openapi.sh; npm below), and
    # Prometheus brings promtool and the server the scrape test starts
    nodejs
    prometheus
)
# npm comes with Node.js from some other sources, which conflict with
# Debian's npm package: wanted only where no npm is on PATH yet.
if ! command -v npm >/dev/null 2>&1; then
    PACKAGES+=(npm)
fi

# Only `make test-cluster` needs these: most checkouts never start a cluster.
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
case "${1:-}" in
--cluster) PACKAGES+=("${CLUSTER_PACKAGES[@]}") ;;
--image) PACKAGES+=("${IMAGE_PACKAGES[@]}") ;;
esac

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
