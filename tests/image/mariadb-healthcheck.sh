#!/bin/sh
# healthcheck.sh in the MariaDB test image (tests/image/mariadb.Dockerfile):
# the two checks compose.yaml's health check asks of mariadb:10.11, so the
# file runs here unchanged. Each flag is one check; all must pass.
#   --connect              the server accepts a connection
#   --innodb_initialized   InnoDB finished starting
# It connects as the account of MARIADB_USER and MARIADB_PASSWORD (the
# container's environment), over TCP as ticketd does; mariadb-start.sh
# creates that account before the server takes connections.
set -eu
[ $# -gt 0 ] || set -- --connect
q() {
    MYSQL_PWD="${MARIADB_PASSWORD}" mariadb --no-defaults -h 127.0.0.1 -u "${MARIADB_USER}" \
        --batch --skip-column-names -e "$1"
}
for check in "$@"; do
    case "${check}" in
    --connect) q 'SELECT 1' >/dev/null ;;
    --innodb_initialized)
        [ "$(q "SELECT COUNT(*) FROM information_schema.ENGINES WHERE ENGINE = 'InnoDB' AND SUPPORT IN ('YES', 'DEFAULT')")" = 1 ]
        ;;
    *)
        echo "healthcheck.sh: ${check}: this image checks only --connect and --innodb_initialized" >&2
        exit 2
        ;;
    esac
done
