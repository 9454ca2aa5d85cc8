# MariaDB from Debian's package on the same base as ticketd's image, for
# `make test-image` on machines without a registry (compose.yaml uses
# mariadb:10.11). It reads the official image's MARIADB_DATABASE,
# MARIADB_USER and MARIADB_PASSWORD (see mariadb-start.sh).
FROM debian:bookworm-slim

# No init system in a container: the package must not try to start a server
# while it installs.
RUN printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
    && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mariadb-server \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/lib/mysql/* \
    && mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld /var/lib/mysql

COPY tests/image/mariadb-start.sh /usr/local/bin/mariadb-start.sh
USER mysql
EXPOSE 3306
VOLUME /var/lib/mysql
CMD ["/usr/local/bin/mariadb-start.sh"]
