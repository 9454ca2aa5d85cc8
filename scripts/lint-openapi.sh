#!/usr/bin/env bash
# docs/openapi.yaml through a real OpenAPI 3.1 linter: Redocly's CLI at the
# version tools/openapi/package-lock.json pins, with the rule set of
# tools/openapi/redocly.yaml (recommended-strict: every finding of the
# recommended rules is an error). Run by scripts/run-tests.sh as one check.
#
#   scripts/lint-openapi.sh [openapi.yaml]
#
# `npm ci` installs the linter into tools/openapi/node_modules (git ignores
# it) from the lock file alone, so every machine lints with the same version
# (the 1.34 line asks for Node.js 18.17 or later, which Debian 12 has; 2.x asks
# for 20.19),
# and again only when the lock file changed. Needs node and npm
# (scripts/deps.sh). Exit 0 only with no error and no warning.
set -euo pipefail
cd "$(dirname "$0")/.."
SPEC=${1:-docs/openapi.yaml}
DIR=tools/openapi

for tool in node npm; do
    command -v "${tool}" >/dev/null 2>&1 || {
        echo "lint-openapi: ${tool} not found (scripts/deps.sh installs Debian's nodejs and npm)" >&2
        exit 1
    }
done

# npm ci empties node_modules first; skip it while what it installed last
# came from this very lock file. No install scripts: a linter needs none.
stamp=${DIR}/node_modules/.installed-from-package-lock.json
if ! cmp -s "${DIR}/package-lock.json" "${stamp}"; then
    if ! out=$(npm ci --prefix "${DIR}" --ignore-scripts --prefer-offline --no-audit --no-fund \
        --loglevel=error 2>&1); then
        printf '%s\n' "${out}" >&2
        echo "lint-openapi: npm ci in ${DIR} failed" >&2
        exit 1
    fi
    cp "${DIR}/package-lock.json" "${stamp}"
fi

# No usage report sent home, no advice to upgrade in the log.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
version=$(node -p 'require("./'"${DIR}"'/node_modules/@redocly/cli/package.json").version')
log=$(mktemp)
trap 'rm -f "${log}"' EXIT
rc=0
"${DIR}/node_modules/.bin/redocly" lint --config "${DIR}/redocly.yaml" --format=stylish "${SPEC}" \
    >"${log}" 2>&1 || rc=$?
# The findings, without the banner and the closing cheer.
sed -n "/^${SPEC//\//\\/}:\$/,\$p" "${log}" | grep -v '^$' || true
# Belt and braces: a finding that is only a warning (a rule set changed
# under us) fails too; stylish prints one line per finding.
findings=$(grep -cE '^ +[0-9]+:[0-9]+ +(error|warning) ' "${log}" || true)
if [[ ${rc} -ne 0 || ${findings} -ne 0 ]]; then
    [[ ${findings} -ne 0 ]] || tail -n 20 "${log}"
    echo "openapi lint: ${SPEC}: ${findings} findings (@redocly/cli ${version}, exit ${rc})"
    exit 1
fi
echo "openapi lint: ${SPEC} passes @redocly/cli ${version} (recommended-strict), 0 warnings"
