#!/usr/bin/env bash
# Build ticketd's container image with whichever engine this machine has.
#
#   scripts/image.sh build [TAG]   prepare the base images, build TAG
#                                  (default ticketd:local), print its size
#                                  and the build time
#   scripts/image.sh bases         only prepare debian:bookworm and
#                                  debian:bookworm-slim
#   scripts/image.sh engine        print the engine command that would be used
#
# Sourced, it defines choose_engine, engine, bases and build for the tests.
#
# The engine: Docker when its daemon answers (`docker info`), else Podman.
# TICKETD_ENGINE=docker|podman chooses one.
#
# Base images: the Dockerfile starts FROM debian:bookworm (build stage) and
# debian:bookworm-slim (runtime stage). An image already in the engine's store
# is used as it is. Otherwise it is pulled from the registry; where no
# registry answers, both are made from Debian itself: one
# `debootstrap --variant=minbase bookworm` from the mirror this machine's apt
# uses (TICKETD_DEBIAN_MIRROR overrides it), imported as debian:bookworm, then
# the same tree without documentation, manual pages and locales (and a dpkg
# rule that keeps later packages from installing them) as debian:bookworm-slim,
# as Debian's own slim image is made. Both stay in the store, so this runs once
# per machine (needs root and debootstrap: scripts/deps.sh --image).
#
# Podman is run with runc and cgroupfs (crun refuses some kernels' hybrid
# cgroup layout), a containers.conf without default ulimits (some kernels
# refuse them) and explicit ulimits on build and run; it builds in Docker's
# image format, since the OCI format drops HEALTHCHECK.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "${SCRIPT_DIR}/.." && pwd)
SUITE=bookworm
# ticketd serves up to TICKETD_CONN_LIMIT (4096) connections: room for them,
# within the hard limits these machines allow.
ULIMITS=(--ulimit nofile=10240:10240 --ulimit nproc=4096:4096)
PULL_TIMEOUT_S=${TICKETD_PULL_TIMEOUT_S:-60}

log() { printf 'image: %s\n' "$*" >&2; }
die() {
    printf 'image: error: %s\n' "$*" >&2
    exit 1
}

# ---------------------------------------------------------------------------
# The engine

ENGINE=()
ENGINE_NAME=

podman_conf() {
    local conf="${ROOT}/build/image/containers.conf"
    mkdir -p "${ROOT}/build/image"
    printf '%s\n' '# Written by scripts/image.sh: no default ulimits (explicit ones are given).' \
        '[containers]' 'default_ulimits = []' >"${conf}"
    printf '%s\n' "${conf}"
}

choose_engine() {
    local want=${TICKETD_ENGINE:-}
    if [[ -z "${want}" ]]; then
        if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
            want=docker
        elif command -v podman >/dev/null 2>&1; then
            want=podman
        else
            die "no container engine: neither a Docker daemon nor podman (scripts/deps.sh --image installs podman)"
        fi
    fi
    case "${want}" in
    docker)
        ENGINE=(docker)
        ;;
    podman)
        command -v podman >/dev/null 2>&1 || die "podman not found (scripts/deps.sh --image)"
        CONTAINERS_CONF=${CONTAINERS_CONF:-$(podman_conf)}
        export CONTAINERS_CONF
        ENGINE=(podman --cgroup-manager=cgroupfs)
        if command -v runc >/dev/null 2>&1; then
            ENGINE+=(--runtime "$(command -v runc)")
        fi
        ;;
    *) die "TICKETD_ENGINE=${want}: expected docker or podman" ;;
    esac
    ENGINE_NAME=${want}
}

engine() { "${ENGINE[@]}" "$@"; }

have_image() { engine image inspect "$1" >/dev/null 2>&1; }

# ---------------------------------------------------------------------------
# Base images

# The Debian mirror apt on this machine uses: the first URI of a bookworm
# suite in sources.list or a deb822 .sources file.
debian_mirror() {
    if [[ -n "${TICKETD_DEBIAN_MIRROR:-}" ]]; then
        printf '%s\n' "${TICKETD_DEBIAN_MIRROR}"
        return 0
    fi
    local f uri
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -r "${f}" ]] || continue
        # One-line format: deb [options] URI SUITE COMPONENTS...
        uri=$(sed -E 's/\[[^]]*\]//' "${f}" | awk -v s="${SUITE}" '$1 == "deb" && $3 == s { print $2; exit }')
        [[ -n "${uri}" ]] && break
    done
    if [[ -z "${uri:-}" ]]; then
        for f in /etc/apt/sources.list.d/*.sources; do
            [[ -r "${f}" ]] || continue
            uri=$(awk -v s="${SUITE}" '
                  /^[[:space:]]*$/ { if (u != "" && hit) { print u; exit } u = ""; hit = 0; next }
                  $1 == "URIs:" { u = $2 }
                  $1 == "Suites:" { for (i = 2; i <= NF; i++) if ($i == s) hit = 1 }
                  END { if (u != "" && hit) print u }' "${f}" | head -n 1)
            [[ -n "${uri}" ]] && break
        done
    fi
    [[ -n "${uri:-}" ]] || die "no ${SUITE} mirror in /etc/apt/sources.list*; set TICKETD_DEBIAN_MIRROR"
    printf '%s\n' "${uri}"
}

# The two functions below edit and delete under a folder: never let an empty
# or wrong one mean this machine's own /etc or /usr.
is_rootfs() {
    [[ "$1" == /tmp/ticketd-rootfs.* && -d "$1/etc/apt" && -d "$1/usr/share" ]] ||
        die "not a debootstrap tree: '$1'"
}

# As in Debian's images: apt keeps no package caches (80 MB after an
# `apt-get update`) and no downloaded packages, and fetches no translations.
apt_clean_conf() {
    local dir=$1
    is_rootfs "${dir}"
    cat >"${dir}/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
    printf 'Acquire::Languages "none";\n' >"${dir}/etc/apt/apt.conf.d/docker-no-languages"
}

# What Debian's slim image leaves out, and a dpkg rule so that packages
# installed later leave it out too (copyright files stay).
slim_tree() {
    local dir=$1
    is_rootfs "${dir}"
    cat >"${dir}/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
# As Debian's slim images: no documentation, manual pages or translations.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/info/*
path-exclude /usr/share/man/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
EOF
    find "${dir}/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    find "${dir}/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "${dir}/usr/share/info/"* "${dir}/usr/share/man/"* "${dir}/usr/share/locale/"* \
        "${dir}/usr/share/groff/"* "${dir}/usr/share/lintian/"*
}

import_tree() {
    local dir=$1 tag=$2
    local out
    out=$(tar -C "${dir}" --numeric-owner -c . | engine import - "${tag}" 2>&1) ||
        die "importing ${tag} failed: ${out}"
    log "imported ${tag} ($(du -sm "${dir}" | cut -f1) MB tree)"
}

debootstrap_bases() {
    [[ "$(id -u)" -eq 0 ]] || die "making the base images needs root (debootstrap)"
    command -v debootstrap >/dev/null 2>&1 || die "debootstrap not found (scripts/deps.sh --image)"
    local mirror dir t0
    mirror=$(debian_mirror)
    dir=$(mktemp -d /tmp/ticketd-rootfs.XXXXXX)
    # shellcheck disable=SC2064 # the folder is known now
    trap "rm -rf '${dir}'" EXIT
    t0=$(date +%s)
    log "no registry: debootstrap --variant=minbase ${SUITE} from ${mirror} (about a minute on a near mirror; once)"
    debootstrap --variant=minbase "${SUITE}" "${dir}" "${mirror}" >"${dir}.log" 2>&1 ||
        die "debootstrap failed; see ${dir}.log"
    rm -f "${dir}.log"
    rm -rf "${dir}/var/cache/apt/archives/"*.deb "${dir}/var/cache/apt/"*.bin "${dir}/var/lib/apt/lists/"*
    apt_clean_conf "${dir}"
    have_image "debian:${SUITE}" || import_tree "${dir}" "debian:${SUITE}"
    slim_tree "${dir}"
    have_image "debian:${SUITE}-slim" || import_tree "${dir}" "debian:${SUITE}-slim"
    rm -rf "${dir}"
    trap - EXIT
    log "base images made in $(($(date +%s) - t0)) s; they stay in the store for later builds"
}

pull_base() {
    local tag=$1
    timeout "${PULL_TIMEOUT_S}" "${ENGINE[@]}" pull "docker.io/library/${tag}" >/dev/null 2>&1 || return 1
    [[ "${ENGINE_NAME}" == docker ]] || engine tag "docker.io/library/${tag}" "${tag}"
}

bases() {
    local missing=()
    local tag
    for tag in "debian:${SUITE}" "debian:${SUITE}-slim"; do
        have_image "${tag}" && continue
        pull_base "${tag}" && log "pulled ${tag}" && continue
        missing+=("${tag}")
    done
    if [[ ${#missing[@]} -eq 0 ]]; then
        log "base images debian:${SUITE} and debian:${SUITE}-slim present"
        return 0
    fi
    debootstrap_bases
}

# ---------------------------------------------------------------------------
# The build

# IMAGE_BUILD_ARGS: more arguments for the engine's build (tests/image/run.sh
# keeps no intermediate layers behind).
build() {
    local tag=${1:-ticketd:local}
    local t0 secs bytes args=()
    bases
    if [[ "${ENGINE_NAME}" == podman ]]; then
        args=(--format docker "${ULIMITS[@]}")
    fi
    t0=$(date +%s)
    log "building ${tag} with ${ENGINE_NAME}"
    # shellcheck disable=SC2086 # IMAGE_BUILD_ARGS is a list of words
    engine build "${args[@]}" ${IMAGE_BUILD_ARGS:+${IMAGE_BUILD_ARGS}} -t "${tag}" "${ROOT}" ||
        die "building ${tag} failed"
    secs=$(($(date +%s) - t0))
    bytes=$(engine image inspect --format '{{.Size}}' "${tag}") || die "no image ${tag} after the build"
    printf 'image: %s built in %d s with %s; size %d MB (%d bytes)\n' \
        "${tag}" "${secs}" "${ENGINE_NAME}" "$((bytes / 1000000))" "${bytes}"
}

main() {
    choose_engine
    case "${1:-}" in
    build) build "${2:-}" ;;
    bases) bases ;;
    engine) printf '%s\n' "${ENGINE[*]}" ;;
    *)
        sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
    esac
}

# Sourced (tests/image/run.sh), it only defines the functions.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    main "$@"
fi
