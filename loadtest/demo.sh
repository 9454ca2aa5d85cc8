#!/usr/bin/env bash
# ticketd demo: fire storms of duplicate requests at a running ticketd and
# show that nothing was bought, paid or credited twice.
#
# Usage: loadtest/demo.sh [--target URL]... [--config FILE] [--quick]
#
#   --target URL    ticketd to storm, repeatable (default http://127.0.0.1:8080,
#                   the one `make run` serves)
#   --config FILE   secrets (default config/ticketd.env; the environment wins)
#   --quick         smaller storms
#
# Start ticketd first (`make run` in another terminal). Each scenario prints
# its verdict table; the summary at the end has one line per scenario. Exit
# status: 0 no damage, 2 damage found, 1 a scenario could not run.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "${HERE}/.." && pwd)
LOAD=${ROOT}/build/loadtest/ticketd-load
CONFIG=${ROOT}/config/ticketd.env
TARGETS=()
QUICK=0

while (($# > 0)); do
    case "$1" in
    --target) TARGETS+=(--target "${2:?}"); shift ;;
    --config) CONFIG=${2:?}; shift ;;
    --quick) QUICK=1 ;;
    -h | --help)
        sed -n '/^# Usage:/,/^# status:/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *) printf 'demo: unknown option %s\n' "$1" >&2; exit 1 ;;
    esac
    shift
done
((${#TARGETS[@]} > 0)) || TARGETS=(--target http://127.0.0.1:8080)

[[ -x "${LOAD}" ]] || { printf 'demo: build the tools first: make -C loadtest\n' >&2; exit 1; }
command -v jq >/dev/null || { printf 'demo: jq not found (apt-get install jq)\n' >&2; exit 1; }
if ! curl -fsS -o /dev/null --max-time 2 "${TARGETS[1]}/livez" 2>/dev/null; then
    printf 'demo: %s does not answer; start ticketd first (make run)\n' "${TARGETS[1]}" >&2
    exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ticketd-demo.XXXXXX")
trap 'rm -rf "${WORK}"' EXIT

if ((QUICK)); then
    SCENARIOS=(
        "retry-storm --rounds 20 --copies 8"
        "double-click --rounds 20"
        "flash-sale --users 100 --seats 10"
        "gateway-retry --orders 30"
        "mq-redelivery --orders 30"
    )
else
    SCENARIOS=(
        "retry-storm --rounds 100 --copies 16"
        "double-click --rounds 100"
        "flash-sale --users 500 --seats 20 --rounds 3"
        "gateway-retry --orders 200"
        "mq-redelivery --orders 200"
    )
fi

worst=0
for s in "${SCENARIOS[@]}"; do
    name=${s%% *}
    read -r -a args <<<"${s}"
    printf '\n=== %s ===\n' "${name}"
    rc=0
    timeout 180 "${LOAD}" "${args[@]}" "${TARGETS[@]}" --config "${CONFIG}" --duration 60 \
        --requests 100000 --settle 20 --json "${WORK}/${name}.json" || rc=$?
    if ((rc == 2)); then
        worst=2
    elif ((rc != 0 && worst == 0)); then
        worst=1
    fi
done

printf '\n=== summary ===\n'
printf '%-15s %9s %8s %10s %10s %8s  %s\n' scenario requests orders replays rejected damage verdict
for s in "${SCENARIOS[@]}"; do
    name=${s%% *}
    f=${WORK}/${name}.json
    if [[ ! -s "${f}" ]]; then
        printf '%-15s %9s %8s %10s %10s %8s  %s\n' "${name}" - - - - - "did not run"
        continue
    fi
    jq -r --arg n "${name}" '[$n, .requests.total, .orders_created, .replays.total,
        ([.answers[] | select(.kind != "control" and .status >= 400) | .count] | add // 0),
        .damage.total, .verdict] | @tsv' "${f}" |
        awk -F'\t' '{ printf "%-15s %9s %8s %10s %10s %8s  %s\n", $1, $2, $3, $4, $5, $6, $7 }'
done
case ${worst} in
0) printf '\nNothing was sold, paid or credited twice.\n' ;;
2) printf '\nDAMAGE FOUND: see the tables above.\n' ;;
*) printf '\nNo damage seen, but some scenarios had errors: see above.\n' ;;
esac
exit "${worst}"
