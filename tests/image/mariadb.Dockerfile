# MariaDB from Debian's package on the same base as ticketd's image, for
# `make test-image` on machines without a registry (compose.yaml uses
# mariadb:10.11; tests/image/compose.local.yaml puts this image in its
# place). It reads the official image's MARIADB_DATABASE, MARIADB_USER and
# MARIADB_PASSWORD (see mariadb-start.sh), takes server options as its
# command and has a healthcheck.sh for compose.yaml's health check.
FROM debian:bookworm-slim

# No init system in a container: the package must not try to start a server
# while it installs.
RUN printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
    && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mariadb-server \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/lib/mysql/* \
    && mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld /var/lib/mysql

COPY tests/image/mariadb-start.sh /usr/local/bin/mariadb-start.sh
COPY tests/image/mariadb-healthcheck.sh /usr/local/bin/healthcheck.sh
USER mysql
EXPOSE 3306
VOLUME /var/lib/mysql
# As with mariadb:10.11, a command of options (compose.yaml's) is the
# server's options.
ENTRYPOINT ["/usr/local/bin/mariadb-start.sh"]
