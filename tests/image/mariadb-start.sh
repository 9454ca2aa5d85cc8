#!/bin/sh
# Start MariaDB in a container: make the data folder on first start, then run
# the server with an init file that creates the database and the account
# named by MARIADB_DATABASE, MARIADB_USER and MARIADB_PASSWORD (every start;
# each statement is a no-op once done).
#
# The image's entrypoint: options (arguments starting with "-") go to the
# server, as mariadb:10.11 takes them; any other command runs as given.
set -eu
case "${1:--}" in
-*) ;;
*) exec "$@" ;;
esac
: "${MARIADB_DATABASE:?}" "${MARIADB_USER:?}" "${MARIADB_PASSWORD:?}"
case "${MARIADB_DATABASE}${MARIADB_USER}${MARIADB_PASSWORD}" in
*[!A-Za-z0-9_-]*)
    echo "mariadb-start: MARIADB_DATABASE, MARIADB_USER and MARIADB_PASSWORD: only [A-Za-z0-9_-]" >&2
    exit 1
    ;;
esac
datadir=/var/lib/mysql
if [ ! -d "${datadir}/mysql" ]; then
    mariadb-install-db --datadir="${datadir}" --auth-root-authentication-method=socket \
        --skip-test-db >/dev/null
fi
init=/run/mysqld/init.sql
cat >"${init}" <<SQL
CREATE DATABASE IF NOT EXISTS \`${MARIADB_DATABASE}\` CHARACTER SET utf8mb4;
CREATE USER IF NOT EXISTS '${MARIADB_USER}'@'%' IDENTIFIED BY '${MARIADB_PASSWORD}';
GRANT ALL ON \`${MARIADB_DATABASE}\`.* TO '${MARIADB_USER}'@'%';
SQL
exec mariadbd --datadir="${datadir}" --bind-address=0.0.0.0 --init-file="${init}" "$@"
