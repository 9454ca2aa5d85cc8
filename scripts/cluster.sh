#!/usr/bin/env bash
# A private MariaDB Galera cluster of three nodes and a Redis primary with a
# replica and three Sentinels, all on 127.0.0.1 and under one state folder,
# for `make test-cluster` (tests/cluster/run.sh) and the figures of
# docs/scaling.md. Nothing here touches the distribution's services.
#
# Usage: scripts/cluster.sh COMMAND STATE_DIR [ARG]
#
#   up STATE_DIR            start what is not running: when no node runs,
#                           the one that holds the most commits (node 1 on
#                           a first start) bootstraps the cluster
#                           (--wsrep-new-cluster), the others join it
#                           (IST, or state transfer by mariabackup); Redis
#                           primary, replica, Sentinels. Creates the
#                           database, its user and the SST user.
#   down STATE_DIR          stop everything this folder started (by pid:
#                           SIGTERM, then SIGKILL after a bounded wait)
#   status STATE_DIR        one line per process; exit 0 only if all run
#   kill-node STATE_DIR N   SIGKILL Galera node N (1-3)
#   crash STATE_DIR [power] SIGKILL all three Galera nodes at once (one
#                           kill(2) each, no wait between them); with
#                           "power" and the nodes on disks of their own
#                           (TICKETD_CLUSTER_DISK_MB), each disk then loses
#                           what the kernel had not yet written to it, as
#                           in a power cut (see "Disks" below)
#   start-node STATE_DIR N  start node N again; it rejoins (IST, or SST)
#   wait-synced STATE_DIR N [S]
#                           wait (S seconds, default 60) until node N is
#                           Synced in a primary component of 3 nodes
#   kill-redis-primary STATE_DIR
#                           SIGKILL whichever Redis the Sentinels name
#                           primary; prints its port
#   wait-failover STATE_DIR OLD_PORT [S]
#                           wait until the Sentinels name another primary
#                           and it answers ROLE master
#   start-redis STATE_DIR PORT
#                           start the Redis of PORT again (22379 or 22380);
#                           Sentinel turns it into a replica of the primary
#   primary-port STATE_DIR  the port the Sentinels name primary
#   sql STATE_DIR N [mariadb args...]
#                           a root client on node N (reads SQL on stdin)
#
# Ports (one set per node; IST is base+1, SST base+2):
#   Galera SQL 22306 22307 22308, wsrep base 22567 22577 22587,
#   Redis primary 22379, replica 22380, Sentinels 22381 22382 22383.
#   All below 32768, outside Linux's range of ephemeral ports: a node or a
#   Redis started again mid-test must find its port free, and any outgoing
#   connection of the storms could hold a port of that range (a restarted
#   node once found its IST port taken and never rejoined).
#   Override with TICKETD_CLUSTER_SQL_PORTS, _WSREP_PORTS, _REDIS_PORTS,
#   _SENTINEL_PORTS (space-separated).
#
# Durability: innodb_flush_log_at_trx_commit=3 (TICKETD_CLUSTER_FLUSH_AT_COMMIT
# overrides it; the setting is dynamic, SET GLOBAL changes it on a running
# node). Not 1: a commit that goes through the two-phase commit (Galera's
# wsrep coordinates it) has only its prepare flushed with 1, its commit
# left to the coordinator's recovery, which after a power cut of every
# node rolls back what it finds only prepared; 3 flushes at prepare and at
# commit. With 2 a node writes its log at each commit and flushes it to disk
# once a second: three nodes that lose power together lose the commits of
# that last second, answered orders included (docs/scaling.md).
#
# Disks: with TICKETD_CLUSTER_DISK_MB=N (root only) each node's folder is an
# ext4 file system of N MB of its own, on a loop device with direct I/O
# over STATE_DIR/disks/gN.img, so that the image holds exactly what the
# kernel wrote to that "disk". `crash STATE_DIR power` copies each image
# right after the kill, which drops every page the kernel still held in
# its cache, and mounts the copy: what a node finds after a power cut.
# Once made, the disks stay in use for that folder (`down` unmounts them).
# With TICKETD_CLUSTER_CUT_COPY=DIR the three images as the power cut left
# them are also copied to DIR/gN.img (overwritten by the next cut), to be
# opened on their own afterwards: what each disk held, before any
# recovery touched it.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/proc.sh
. "${SCRIPT_DIR}/proc.sh"
WAIT_S=${TICKETD_SERVICES_WAIT_S:-120}

read -r -a SQL_PORTS <<<"${TICKETD_CLUSTER_SQL_PORTS:-22306 22307 22308}"
read -r -a WSREP_PORTS <<<"${TICKETD_CLUSTER_WSREP_PORTS:-22567 22577 22587}"
read -r -a REDIS_PORTS <<<"${TICKETD_CLUSTER_REDIS_PORTS:-22379 22380}"
read -r -a SENTINEL_PORTS <<<"${TICKETD_CLUSTER_SENTINEL_PORTS:-22381 22382 22383}"
FLUSH_AT_COMMIT=${TICKETD_CLUSTER_FLUSH_AT_COMMIT:-3}
[[ "${FLUSH_AT_COMMIT}" =~ ^[0123]$ ]] || {
    echo "cluster: error: TICKETD_CLUSTER_FLUSH_AT_COMMIT must be 0, 1, 2 or 3" >&2
    exit 2
}
DISK_MB=${TICKETD_CLUSTER_DISK_MB:-}

MASTER_NAME=ticketd
DB_NAME=${TICKETD_MYSQL_DB:-ticketd}
DB_USER=${TICKETD_MYSQL_USER:-ticketd}
DB_PASSWORD=${TICKETD_MYSQL_PASSWORD:-ticketd}
# The state transfer user: mariabackup on the donor connects as it. Local
# to this private, loopback-only cluster; not a secret worth the name.
SST_USER=sst
SST_PASSWORD=sst-ticketd

log() { printf 'cluster: %s\n' "$*" >&2; }
die() {
    printf 'cluster: error: %s\n' "$*" >&2
    exit 1
}
usage() {
    sed -n '/^# Usage:/,/^#   _SENTINEL_PORTS/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

need_bin() {
    find_bin "$@" || die "'$1' not found; run scripts/deps.sh --cluster"
}




tail_log() {
    [[ -s "$1" ]] && tail -n 30 "$1" | sed 's/^/    /' >&2
    return 0
}

STATE=""
set_state() {
    [[ -n "$1" ]] || die "STATE_DIR is empty"
    mkdir -p "$1"
    STATE=$(cd "$1" && pwd)
    ((${#STATE} < 80)) || die "STATE_DIR path too long for Unix sockets: ${STATE}"
}

take_lock() {
    command -v flock >/dev/null 2>&1 || return 0
    exec 9>"${STATE}/.cluster.lock"
    flock -w "${WAIT_S}" 9 || die "another cluster.sh holds ${STATE}/.cluster.lock"
}

# ---------------------------------------------------------------------------
# Galera

node_dir() { printf '%s/g%d' "${STATE}" "$1"; }
node_sock() { printf '%s/g%d/sock' "${STATE}" "$1"; }
node_pidfile() { printf '%s/g%d/mysqld.pid' "${STATE}" "$1"; }
node_pid() { running_pid "$(node_pidfile "$1")" mariadbd; }

galera_provider() {
    local p
    for p in /usr/lib/galera/libgalera_smm.so /usr/lib/galera-4/libgalera_smm.so \
        /usr/lib/x86_64-linux-gnu/galera/libgalera_smm.so; do
        [[ -f "${p}" ]] && {
            printf '%s\n' "${p}"
            return 0
        }
    done
    p=$(dpkg -L galera-4 2>/dev/null | grep 'libgalera_smm\.so$' | head -1 || true)
    [[ -n "${p}" ]] || die "libgalera_smm.so not found; run scripts/deps.sh --cluster"
    printf '%s\n' "${p}"
}

cluster_address() {
    local a="gcomm://" i
    for i in 0 1 2; do
        a+="127.0.0.1:${WSREP_PORTS[$i]}"
        ((i < 2)) && a+=","
    done
    printf '%s\n' "${a}"
}

write_node_cnf() {
    local n=$1 d base sqlp
    d=$(node_dir "${n}")
    base=${WSREP_PORTS[$((n - 1))]}
    sqlp=${SQL_PORTS[$((n - 1))]}
    {
        echo "# Galera node ${n} for ticketd's cluster tests, written by scripts/cluster.sh."
        echo "[mysqld]"
        echo "datadir=${d}/data"
        echo "socket=${d}/sock"
        echo "pid-file=${d}/mysqld.pid"
        echo "log-error=${d}/mysqld.log"
        echo "tmpdir=${d}/tmp"
        echo "port=${sqlp}"
        echo "bind-address=127.0.0.1"
        if [[ "$(id -u)" -eq 0 ]]; then
            echo "user=root"
        fi
        echo "skip-name-resolve"
        echo "character-set-server=utf8mb4"
        # Three servers share two cores and the other engineers' tests.
        echo "innodb_buffer_pool_size=128M"
        echo "innodb_log_file_size=64M"
        echo "max_connections=300"
        echo "performance_schema=OFF"
        # Galera's requirements.
        echo "binlog_format=ROW"
        echo "default_storage_engine=InnoDB"
        echo "innodb_autoinc_lock_mode=2"
        # ticketd's migrations create a trigger (005); with Galera's binary
        # log that needs SUPER or this.
        echo "log_bin_trust_function_creators=1"
        # Each commit flushed to disk before it is answered (3: at prepare
        # and at commit; 1 leaves a two-phase commit's COMMIT unflushed).
        # A commit is certified by every node before it returns, but three
        # nodes that lose power together keep only what reached their
        # disks: with 2 (write at commit, flush once a second) they lose
        # the last second's answered orders (the galera-crash-durability
        # lesson).
        echo "innodb_flush_log_at_trx_commit=${FLUSH_AT_COMMIT}"
        echo "wsrep_on=ON"
        echo "wsrep_provider=$(galera_provider)"
        echo "wsrep_cluster_name=ticketd-test"
        echo "wsrep_cluster_address=$(cluster_address)"
        echo "wsrep_node_name=g${n}"
        echo "wsrep_node_address=127.0.0.1"
        echo "wsrep_provider_options=\"base_port=${base};ist.recv_addr=127.0.0.1:$((base + 1));gcache.size=128M\""
        echo "wsrep_sst_method=mariabackup"
        echo "wsrep_sst_auth=${SST_USER}:${SST_PASSWORD}"
        echo "wsrep_sst_receive_address=127.0.0.1:$((base + 2))"
        echo "wsrep_slave_threads=2"
        # wsrep_sync_wait (causal reads) is left at the server's default, 0,
        # as on a stock node: ticketd sets it on its own connections
        # (TICKETD_MYSQL_SYNC_WAIT, 1 by default), and the
        # galera-read-own-writes lesson shows what happens without it.
        echo "[sst]"
        echo "progress=0"
        echo "sst-syslog=-1"
    } >"${d}/my.cnf"
}

node_root() {
    local n=$1
    shift
    "${MARIADB}" --no-defaults --socket="$(node_sock "${n}")" --user=root --batch \
        --skip-column-names --connect-timeout=3 "$@"
}

node_status() {
    node_root "$1" -e "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
        WHERE VARIABLE_NAME IN ('WSREP_LOCAL_STATE_COMMENT','WSREP_CLUSTER_SIZE','WSREP_CLUSTER_STATUS')
        ORDER BY VARIABLE_NAME" 2>/dev/null | tr '\n' ' '
}

# Synced, in a primary component of SIZE nodes.
node_synced() {
    local size status state
    # Order: CLUSTER_SIZE CLUSTER_STATUS LOCAL_STATE_COMMENT
    read -r size status state <<<"$(node_status "$1")" || return 1
    [[ "${size}" =~ ^[0-9]+$ && "${status}" == Primary && "${state}" == Synced ]] &&
        ((size >= ${2:-3}))
}

# The default ports lie below Linux's ephemeral range (32768-60999), but
# ports given through TICKETD_CLUSTER_*_PORTS may not, and then another
# process's outgoing connection may hold one for a moment: the node stops
# with "Address already in use". Such a start is tried again (BIND_RETRIES
# times); any other exit is an error.
BIND_RETRIES=12

# The SST scripts (and their socat) a dead mariadbd left behind: every
# process of its session (setsid made mariadbd its leader), by pid.
kill_session() {
    local sid=$1 pid
    [[ "${sid}" =~ ^[0-9]+$ && "${sid}" -gt 1 ]] || return 0
    for pid in $(ps -eo pid=,sid= | awk -v s="${sid}" '$2 == s {print $1}'); do
        kill -KILL "${pid}" 2>/dev/null || true
    done
}

# Whether node N's start-up is alive: the launched pid runs mariadbd, or is
# still on its way to it. start_node's background job forks a shell that
# execs setsid, which execs nohup, which execs mariadbd: checked right
# after the launch, as wait_synced does first, the pid may not be called
# mariadbd yet, and a node starting on a busy machine was taken for dead
# ("exited while joining").
node_launching() {
    local f c
    f="$(node_dir "$1")/launched.pid"
    for c in mariadbd nohup setsid bash; do
        running_pid "${f}" "${c}" >/dev/null && return 0
    done
    return 1
}

wait_synced() {
    local n=$1 secs=${2:-60} size=${3:-3} deadline tries=0 log
    deadline=$(($(now_ms) + secs * 1000))
    log="$(node_dir "${n}")/mysqld.log"
    while ! node_synced "${n}" "${size}"; do
        if ! node_pid "${n}" >/dev/null && ! node_launching "${n}"; then
            if ((tries < BIND_RETRIES)) && tail -n 40 "${log}" | grep -q 'Address already in use'; then
                tries=$((tries + 1))
                log "galera: node ${n} found a port taken (another process's outgoing connection); starting it again (${tries}/${BIND_RETRIES})"
                echo "--- cluster.sh: start again after a port clash" >>"${log}"
                kill_session "$(cat "$(node_dir "${n}")/launched.pid" 2>/dev/null || echo 0)"
                sleep $((tries < 4 ? tries * 2 : 8))
                start_node "${n}" "$([[ -e "$(node_dir "${n}")/bootstrapping" ]] && echo 1 || echo 0)"
                continue
            fi
            tail_log "${log}"
            die "galera: node ${n} exited while joining"
        fi
        if (($(now_ms) > deadline)); then
            tail_log "$(node_dir "${n}")/mysqld.log"
            die "galera: node ${n} not Synced in a cluster of ${size} after ${secs}s (status: $(node_status "${n}" || echo none))"
        fi
        sleep 0.2
    done
}

start_node() {
    local n=$1 bootstrap=${2:-0} d pid
    d=$(node_dir "${n}")
    MARIADBD=$(need_bin mariadbd mysqld)
    MARIADB=$(need_bin mariadb mysql)
    if pid=$(node_pid "${n}"); then
        log "galera: node ${n} already runs (pid ${pid})"
        return 0
    fi
    port_busy "${SQL_PORTS[$((n - 1))]}" && die "galera: port ${SQL_PORTS[$((n - 1))]} is taken by another process"
    mkdir -p "${d}/tmp"
    write_node_cnf "${n}"
    if [[ ! -e "${d}/initialised" ]]; then
        rm -rf -- "${d}/data"
        mkdir -p "${d}/data"
        local args=(--defaults-file="${d}/my.cnf" --datadir="${d}/data"
            --auth-root-authentication-method=normal --skip-test-db)
        [[ "$(id -u)" -eq 0 ]] && args+=(--user=root)
        "$(need_bin mariadb-install-db mysql_install_db)" "${args[@]}" </dev/null \
            >"${d}/install.log" 2>&1 9>&- || {
            tail_log "${d}/install.log"
            die "galera: mariadb-install-db failed for node ${n}"
        }
    fi
    local extra=()
    rm -f "${d}/bootstrapping"
    if [[ "${bootstrap}" == 1 ]]; then
        extra=(--wsrep-new-cluster)
        : >"${d}/bootstrapping"
    fi
    # PATH: the SST scripts run mariabackup, socat and friends from it.
    PATH="/usr/sbin:/usr/bin:/sbin:/bin:${PATH}" setsid nohup "${MARIADBD}" \
        --defaults-file="${d}/my.cnf" "${extra[@]}" </dev/null >>"${d}/mysqld.out" 2>&1 9>&- &
    # mysqld writes its pid file only once it is ready; until then this one
    # says whether the start-up is still alive.
    echo "$!" >"${d}/launched.pid"
    log "galera: started node ${n} (pid $!${extra:+, bootstrapping})"
}

create_accounts() {
    local sql host
    sql="CREATE USER IF NOT EXISTS '${SST_USER}'@'localhost' IDENTIFIED BY '${SST_PASSWORD}';"
    sql+="GRANT RELOAD, PROCESS, LOCK TABLES, BINLOG MONITOR, REPLICA MONITOR ON *.* TO '${SST_USER}'@'localhost';"
    sql+="CREATE DATABASE IF NOT EXISTS \`${DB_NAME}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;"
    for host in 127.0.0.1 localhost; do
        sql+="CREATE USER IF NOT EXISTS '${DB_USER}'@'${host}' IDENTIFIED BY '${DB_PASSWORD}';"
        sql+="GRANT ALL PRIVILEGES ON \`${DB_NAME}\`.* TO '${DB_USER}'@'${host}';"
        sql+="GRANT ALL PRIVILEGES ON \`${DB_NAME}\\_%\`.* TO '${DB_USER}'@'${host}';"
    done
    node_root "$1" -e "${sql}" || die "galera: creating the accounts failed"
}

# The last commit (seqno) node N holds: from grastate.dat after a clean
# stop, else (seqno -1: the node died) recovered from InnoDB by
# `mariadbd --wsrep-recover`, which replays the redo log and exits. -1 when
# the node has no data.
node_seqno() {
    local n=$1 d g seq
    d=$(node_dir "${n}")
    g="${d}/data/grastate.dat"
    [[ -e "${d}/initialised" && -s "${g}" ]] || {
        echo -1
        return 0
    }
    seq=$(sed -n 's/^seqno: *//p' "${g}")
    if [[ "${seq}" == -1 || -z "${seq}" ]]; then
        write_node_cnf "${n}"
        # MariaDB appends to its error log: an old recovery's lines would
        # be read as this one's (its seqno, its prepared transactions).
        [[ -e "${d}/recover.log" ]] && mv -f "${d}/recover.log" "${d}/recover.prev.log"
        "${MARIADBD}" --defaults-file="${d}/my.cnf" --wsrep-recover \
            --log-error="${d}/recover.log" </dev/null >/dev/null 2>&1 9>&- || true
        seq=$(sed -n 's/.*WSREP: Recovered position: [^:]*:\(-\{0,1\}[0-9]*\).*/\1/p' \
            "${d}/recover.log" | tail -1)
        log_prepared "${n}" "${d}/recover.log"
    fi
    [[ "${seq}" =~ ^-?[0-9]+$ ]] || seq=-1
    echo "${seq}"
}

# A transaction whose COMMIT was written to the log but had not reached
# the disk when the node died is found prepared by the recovery, which
# rolls it back: it counts in no node's seqno, although its client may
# have been answered (a power cut right after a commit's answer showed
# exactly that with innodb_flush_log_at_trx_commit=1; 3 flushes the
# commit too). Said, so that a
# loss after a crash can be traced to it.
log_prepared() {
    local n=$1 f=$2 count last
    count=$(sed -n 's/.*Found \([0-9]*\) prepared transaction(s) in InnoDB.*/\1/p' "${f}" | tail -1)
    [[ -n "${count}" && "${count}" != 0 ]] || return 0
    last=$(sed -n 's/.*WSREP: Last wsrep seqno to be recovered \(-\{0,1\}[0-9]*\).*/\1/p' "${f}" | tail -1)
    log "galera: node ${n} found ${count} transaction(s) prepared but not committed on its disk (their seqnos up to ${last:-?}); the recovery rolls them back"
}

# When no node runs: the node that holds the most commits, which must
# start the new cluster (a node behind it would make the others drop what
# only they hold). Node 1 on a first start, or when they hold the same.
most_advanced() {
    local n best=1 best_seq=-2 seq
    for n in 1 2 3; do
        seq=$(node_seqno "${n}")
        log "galera: node ${n} holds commits up to seqno ${seq}"
        if ((seq > best_seq)); then
            best=${n}
            best_seq=${seq}
        fi
    done
    echo "${best}"
}

galera_up() {
    local n first="" joined=1
    MARIADB=$(need_bin mariadb mysql)
    MARIADBD=$(need_bin mariadbd mysqld)
    need_bin mariabackup >/dev/null
    need_bin socat >/dev/null
    disks_attach
    for n in 1 2 3; do
        if node_pid "${n}" >/dev/null; then
            first=${n}
            break
        fi
    done
    if [[ -z "${first}" ]]; then
        # Nobody runs: the most advanced node starts a new cluster from
        # its own data (Galera refuses unless its grastate.dat says it is
        # safe to; after a crash none does).
        first=$(most_advanced)
        if [[ -e "$(node_dir "${first}")/data/grastate.dat" ]]; then
            sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$(node_dir "${first}")/data/grastate.dat"
        fi
        start_node "${first}" 1
    fi
    wait_synced "${first}" "${WAIT_S}" 1
    : >"$(node_dir "${first}")/initialised"
    # Idempotent; the joiners' state transfer needs the SST user first.
    create_accounts "${first}"
    for n in 1 2 3; do
        [[ "${n}" == "${first}" ]] && continue
        joined=$((joined + 1))
        start_node "${n}" 0
        # One joiner at a time: each state transfer takes a donor.
        wait_synced "${n}" "${WAIT_S}" "${joined}"
        : >"$(node_dir "${n}")/initialised"
    done
    wait_synced "${first}" "${WAIT_S}"
    if [[ -d "${STATE}/disks" ]]; then
        # What the state transfers wrote, on the disks now, as the kernel
        # would have written it within 30 s: a power cut tests the commits'
        # durability, not how fresh a joiner's copy was.
        for n in 1 2 3; do sync -f "$(node_dir "${n}")"; done
    fi
    log "galera: 3 nodes Synced on 127.0.0.1:${SQL_PORTS[*]}"
}

# ---------------------------------------------------------------------------
# Disks of their own (TICKETD_CLUSTER_DISK_MB; see the header)

disks_on() { [[ -n "${DISK_MB}" || -d "${STATE}/disks" ]]; }
disk_img() { printf '%s/disks/g%d.img' "${STATE}" "$1"; }

disk_mount() {
    local n=$1 img dev
    img=$(disk_img "${n}")
    dev=$(losetup --direct-io=on -f --show "${img}") || die "disk: losetup failed for ${img}"
    # Without direct I/O the image's own page cache would keep what the
    # disk never got, and the power cut would drop nothing.
    [[ "$(cat "/sys/block/${dev#/dev/}/loop/dio" 2>/dev/null)" == 1 ]] || {
        losetup -d "${dev}"
        die "disk: ${dev} has no direct I/O (needs a file system that supports O_DIRECT under ${STATE})"
    }
    mkdir -p "$(node_dir "${n}")"
    mount "${dev}" "$(node_dir "${n}")" || {
        losetup -d "${dev}"
        die "disk: mounting ${img} failed"
    }
}

disks_attach() {
    local n img
    disks_on || return 0
    [[ "$(id -u)" -eq 0 ]] || die "disk: TICKETD_CLUSTER_DISK_MB needs root (losetup, mount)"
    mkdir -p "${STATE}/disks"
    for n in 1 2 3; do
        mountpoint -q "$(node_dir "${n}")" && continue
        img=$(disk_img "${n}")
        if [[ ! -e "${img}" ]]; then
            [[ "${DISK_MB}" =~ ^[0-9]+$ && "${DISK_MB}" -ge 512 ]] ||
                die "disk: TICKETD_CLUSTER_DISK_MB must be at least 512"
            # Nothing of an earlier node without a disk may linger under it.
            rm -rf -- "$(node_dir "${n}")"
            truncate -s "${DISK_MB}M" "${img}"
            mkfs.ext4 -q -F "${img}" || die "disk: mkfs.ext4 failed for ${img}"
        fi
        disk_mount "${n}"
        log "disk: node ${n} on ${img} ($(findmnt -no SOURCE "$(node_dir "${n}")"), direct I/O)"
    done
}

disk_unmount() {
    local n=$1 dir dev tries
    dir=$(node_dir "${n}")
    mountpoint -q "${dir}" || return 0
    dev=$(findmnt -no SOURCE "${dir}")
    for tries in 1 2 3 4 5 6 7 8 9 10; do
        umount "${dir}" 2>/dev/null && break
        ((tries == 10)) && die "disk: ${dir} stays busy"
        sleep 0.5
    done
    losetup -d "${dev}" 2>/dev/null || true
}

disks_detach() {
    local n
    [[ -d "${STATE}/disks" ]] || return 0
    for n in 1 2 3; do disk_unmount "${n}"; done
}

# The power cut, after the kill: each image is copied as the disk holds
# it (the loop device's direct I/O put there exactly what the kernel
# wrote), and the copy replaces it. Unmounting the old one writes its
# cached pages back to the image thrown away. The kernel writes a dirty
# page back on its own only after 30 s (vm.dirty_expire_centisecs), so the
# seconds the copies take change nothing of the log's last second.
disks_power_cut() {
    local n img
    for n in 1 2 3; do
        img=$(disk_img "${n}")
        cp --sparse=always "${img}" "${img}.cut"
    done
    if [[ -n "${TICKETD_CLUSTER_CUT_COPY:-}" ]]; then
        mkdir -p "${TICKETD_CLUSTER_CUT_COPY}"
        for n in 1 2 3; do
            cp --sparse=always "$(disk_img "${n}").cut" "${TICKETD_CLUSTER_CUT_COPY}/g${n}.img"
        done
    fi
    for n in 1 2 3; do
        img=$(disk_img "${n}")
        disk_unmount "${n}"
        mv -f "${img}.cut" "${img}"
    done
    log "disk: power cut: each disk keeps what the kernel had written to it"
}

cmd_crash() {
    local n pid pids=() deadline
    for n in 1 2 3; do
        pid=$(node_pid "${n}") && pids+=("${pid}")
    done
    ((${#pids[@]} == 3)) || die "galera: crash needs all three nodes running (${#pids[@]} run)"
    kill -KILL "${pids[@]}"
    log "galera: SIGKILL to nodes 1, 2 and 3 (pids ${pids[*]})"
    deadline=$(($(now_ms) + 10000))
    for pid in "${pids[@]}"; do
        while proc_alive "${pid}" && (($(now_ms) < deadline)); do sleep 0.02; done
    done
    for n in 1 2 3; do
        kill_session "$(cat "$(node_dir "${n}")/launched.pid" 2>/dev/null || echo 0)"
    done
    if [[ "${1:-}" == power ]]; then
        [[ -d "${STATE}/disks" ]] || die "disk: 'crash power' needs the nodes on disks of their own (TICKETD_CLUSTER_DISK_MB)"
        disks_power_cut
    fi
}

# ---------------------------------------------------------------------------
# Redis: primary, replica, three Sentinels

redis_dir() { printf '%s/redis-%d' "${STATE}" "$1"; }
sentinel_dir() { printf '%s/sentinel-%d' "${STATE}" "$1"; }

rcli() { timeout 3 "${REDIS_CLI}" -h 127.0.0.1 -p "$1" "${@:2}" 2>/dev/null; }

start_redis_port() {
    local port=$1 d pid
    REDIS_SERVER=$(need_bin redis-server)
    d=$(redis_dir "${port}")
    mkdir -p "${d}"
    if pid=$(running_pid "${d}/redis.pid" redis-server); then
        log "redis: ${port} already runs (pid ${pid})"
        return 0
    fi
    port_busy "${port}" && die "redis: port ${port} is taken by another process"
    # A restarted server starts as it was configured; Sentinel makes it a
    # replica of whoever is primary now (replicaof is rewritten into the
    # file by Sentinel only for a running server, so a restarted former
    # primary is a primary for a moment: ticketd checks ROLE).
    {
        echo "bind 127.0.0.1"
        echo "port ${port}"
        echo "protected-mode no"
        echo "daemonize yes"
        echo "pidfile \"${d}/redis.pid\""
        echo "logfile \"${d}/redis.log\""
        echo "dir \"${d}\""
        echo "save \"\""
        echo "appendonly no"
        echo "maxmemory 256mb"
        if [[ "${port}" != "${REDIS_PORTS[0]}" || -e "${d}/demoted" ]]; then
            local p
            p=$(primary_port 2>/dev/null || echo "${REDIS_PORTS[0]}")
            [[ "${p}" != "${port}" ]] && echo "replicaof 127.0.0.1 ${p}"
        fi
    } >"${d}/redis.conf"
    launch_until_bound "redis ${port}" "${port}" "${d}/redis.log" \
        "${REDIS_SERVER}" "${d}/redis.conf"
}

# Starts a daemonizing Redis (server or Sentinel) and waits for PONG; when
# its port was taken (see BIND_RETRIES), starts it again after a pause.
launch_until_bound() {
    local name=$1 port=$2 logf=$3 tries=0 deadline
    shift 3
    while :; do
        : >>"${logf}"
        local before
        before=$(wc -l <"${logf}")
        "$@" </dev/null >>"${logf}" 2>&1 9>&- || die "${name}: failed to start"
        deadline=$(($(now_ms) + 20000))
        until [[ "$(rcli "${port}" ping)" == PONG ]]; do
            if tail -n +"$((before + 1))" "${logf}" | grep -q 'Address already in use'; then
                break
            fi
            (($(now_ms) > deadline)) && {
                tail_log "${logf}"
                die "${name}: does not answer"
            }
            sleep 0.05
        done
        if [[ "$(rcli "${port}" ping)" == PONG ]]; then
            log "${name}: up"
            return 0
        fi
        tries=$((tries + 1))
        ((tries > BIND_RETRIES)) && die "${name}: port ${port} stayed taken"
        log "${name}: port ${port} taken for now (another process's outgoing connection); trying again (${tries}/${BIND_RETRIES})"
        sleep $((tries < 4 ? tries * 2 : 8))
    done
}

start_sentinel() {
    local port=$1 d pid
    d=$(sentinel_dir "${port}")
    mkdir -p "${d}"
    if pid=$(running_pid "${d}/sentinel.pid" redis-sentinel || running_pid "${d}/sentinel.pid" redis-server); then
        log "sentinel: ${port} already runs (pid ${pid})"
        return 0
    fi
    port_busy "${port}" && die "sentinel: port ${port} is taken by another process"
    if [[ ! -s "${d}/sentinel.conf" ]]; then
        # Sentinel rewrites this file as it learns; written once only.
        {
            echo "bind 127.0.0.1"
            echo "port ${port}"
            echo "protected-mode no"
            echo "daemonize yes"
            echo "pidfile \"${d}/sentinel.pid\""
            echo "logfile \"${d}/sentinel.log\""
            echo "dir \"${d}\""
            echo "sentinel monitor ${MASTER_NAME} 127.0.0.1 ${REDIS_PORTS[0]} 2"
            # Bounded so a test's failover takes seconds, not the default
            # half minute: a primary silent for 3 s is down. Not 1 s: a
            # Sentinel pings once a second, and its first ping to a newly
            # promoted primary leaves up to a second after the switch, so
            # with 1 s it often took the new primary for down at once,
            # tried a failover with no replica left (aborted), and every
            # Sentinel that voted then waited twice the failover timeout
            # before it would try again: a real failure just after went
            # unanswered for 20 s. The timeout is short for the same
            # reason (a failed attempt is retried 12 s later, not 20).
            echo "sentinel down-after-milliseconds ${MASTER_NAME} 3000"
            echo "sentinel failover-timeout ${MASTER_NAME} 6000"
            echo "sentinel parallel-syncs ${MASTER_NAME} 1"
        } >"${d}/sentinel.conf"
    fi
    launch_until_bound "sentinel ${port}" "${port}" "${d}/sentinel.log" \
        "$(need_bin redis-sentinel redis-server)" "${d}/sentinel.conf" --sentinel
}

# The port the Sentinels (the first that answers) name primary.
primary_port() {
    local s out
    REDIS_CLI=${REDIS_CLI:-$(need_bin redis-cli)}
    for s in "${SENTINEL_PORTS[@]}"; do
        out=$(rcli "${s}" SENTINEL get-master-addr-by-name "${MASTER_NAME}" | sed -n 2p) || continue
        [[ "${out}" =~ ^[0-9]+$ ]] && {
            printf '%s\n' "${out}"
            return 0
        }
    done
    return 1
}

redis_up() {
    local p deadline any=0
    REDIS_CLI=$(need_bin redis-cli)
    # Redis keeps nothing across restarts here (no snapshots), and the
    # Sentinels' rewritten files remember the last failover: when none of
    # them runs, start from scratch (primary on the first port), or a
    # Sentinel would name a primary that came back as a replica.
    for p in "${REDIS_PORTS[@]}"; do
        running_pid "$(redis_dir "${p}")/redis.pid" redis-server >/dev/null && any=1
    done
    for p in "${SENTINEL_PORTS[@]}"; do
        running_pid "$(sentinel_dir "${p}")/sentinel.pid" redis-sentinel >/dev/null && any=1
        running_pid "$(sentinel_dir "${p}")/sentinel.pid" redis-server >/dev/null && any=1
    done
    if [[ "${any}" == 0 ]]; then
        for p in "${REDIS_PORTS[@]}"; do rm -rf -- "$(redis_dir "${p}")"; done
        for p in "${SENTINEL_PORTS[@]}"; do rm -rf -- "$(sentinel_dir "${p}")"; done
    fi
    for p in "${REDIS_PORTS[@]}"; do
        start_redis_port "${p}"
    done
    for p in "${SENTINEL_PORTS[@]}"; do
        start_sentinel "${p}"
    done
    # The Sentinels know the replica once they asked the primary (INFO,
    # every 10 s at first); wait until they do, or a failover finds nobody.
    deadline=$(($(now_ms) + 30000))
    until [[ "$(rcli "${SENTINEL_PORTS[0]}" SENTINEL master "${MASTER_NAME}" |
        awk 'prev=="num-slaves"{print; exit} {prev=$0}')" -ge 1 ]] 2>/dev/null &&
        [[ "$(rcli "${SENTINEL_PORTS[0]}" SENTINEL master "${MASTER_NAME}" |
            awk 'prev=="num-other-sentinels"{print; exit} {prev=$0}')" -ge 2 ]] 2>/dev/null; do
        (($(now_ms) > deadline)) && die "sentinel: the Sentinels do not know the replica and each other after 30 s"
        sleep 0.2
    done
    log "redis: primary ${REDIS_PORTS[0]}, replica ${REDIS_PORTS[1]}, Sentinels ${SENTINEL_PORTS[*]} (master name ${MASTER_NAME})"
}

# ---------------------------------------------------------------------------

stop_pid() {
    local name=$1 pid=$2 grace=$3 deadline
    kill -TERM "${pid}" 2>/dev/null || true
    kill -CONT "${pid}" 2>/dev/null || true
    deadline=$(($(now_ms) + grace * 1000))
    while proc_alive "${pid}"; do
        if (($(now_ms) > deadline)); then
            log "${name}: pid ${pid} ignored SIGTERM; SIGKILL"
            kill -KILL "${pid}" 2>/dev/null || true
            sleep 0.2
            break
        fi
        sleep 0.05
    done
    log "${name}: stopped pid ${pid}"
}

cmd_down() {
    local pid n p
    for p in "${SENTINEL_PORTS[@]}"; do
        if pid=$(running_pid "$(sentinel_dir "${p}")/sentinel.pid" redis-sentinel ||
            running_pid "$(sentinel_dir "${p}")/sentinel.pid" redis-server); then
            stop_pid "sentinel ${p}" "${pid}" 5
        fi
    done
    for p in "${REDIS_PORTS[@]}"; do
        if pid=$(running_pid "$(redis_dir "${p}")/redis.pid" redis-server); then
            stop_pid "redis ${p}" "${pid}" 5
        fi
    done
    # Galera: the last node to stop is the one safe to bootstrap from next.
    for n in 3 2 1; do
        if pid=$(node_pid "${n}"); then
            stop_pid "galera node ${n}" "${pid}" 60
        fi
        kill_session "$(cat "$(node_dir "${n}")/launched.pid" 2>/dev/null || echo 0)"
    done
    disks_detach
}

cmd_status() {
    local rc=0 n p pid
    MARIADB=$(need_bin mariadb mysql)
    for n in 1 2 3; do
        if pid=$(node_pid "${n}"); then
            log "galera node ${n}: pid ${pid}, :${SQL_PORTS[$((n - 1))]}, $(node_status "${n}" || echo '?')"
        else
            log "galera node ${n}: stopped"
            rc=3
        fi
    done
    for p in "${REDIS_PORTS[@]}"; do
        if pid=$(running_pid "$(redis_dir "${p}")/redis.pid" redis-server); then
            log "redis ${p}: pid ${pid}"
        else
            log "redis ${p}: stopped"
            rc=3
        fi
    done
    for p in "${SENTINEL_PORTS[@]}"; do
        if pid=$(running_pid "$(sentinel_dir "${p}")/sentinel.pid" redis-sentinel ||
            running_pid "$(sentinel_dir "${p}")/sentinel.pid" redis-server); then
            log "sentinel ${p}: pid ${pid}"
        else
            log "sentinel ${p}: stopped"
            rc=3
        fi
    done
    return "${rc}"
}

valid_node() { [[ "$1" =~ ^[123]$ ]] || die "node must be 1, 2 or 3"; }

main() {
    [[ $# -ge 2 ]] || usage
    local cmd=$1 pid p old deadline
    set_state "$2"
    shift 2
    case "${cmd}" in
    up)
        take_lock
        galera_up
        redis_up
        ;;
    down)
        take_lock
        cmd_down
        ;;
    status) cmd_status ;;
    crash)
        take_lock
        cmd_crash "${1:-}"
        ;;
    kill-node)
        valid_node "${1:-}"
        pid=$(node_pid "$1") || die "galera: node $1 is not running"
        kill -KILL "${pid}"
        log "galera: SIGKILL to node $1 (pid ${pid})"
        ;;
    start-node)
        valid_node "${1:-}"
        start_node "$1" 0
        ;;
    wait-synced)
        valid_node "${1:-}"
        MARIADB=$(need_bin mariadb mysql)
        wait_synced "$1" "${2:-60}"
        log "galera: node $1 Synced, cluster of 3"
        ;;
    primary-port)
        primary_port || die "no Sentinel names a primary"
        ;;
    kill-redis-primary)
        REDIS_CLI=$(need_bin redis-cli)
        p=$(primary_port) || die "no Sentinel names a primary"
        pid=$(running_pid "$(redis_dir "${p}")/redis.pid" redis-server) || die "redis ${p} is not running"
        kill -KILL "${pid}"
        : >"$(redis_dir "${p}")/demoted"
        log "redis: SIGKILL to primary ${p} (pid ${pid})"
        printf '%s\n' "${p}"
        ;;
    wait-failover)
        REDIS_CLI=$(need_bin redis-cli)
        old=${1:?OLD_PORT}
        deadline=$(($(now_ms) + ${2:-30} * 1000))
        while :; do
            p=$(primary_port || echo "${old}")
            if [[ "${p}" != "${old}" ]] && rcli "${p}" ROLE | head -1 | grep -qx master; then
                log "redis: the Sentinels promoted ${p}"
                printf '%s\n' "${p}"
                break
            fi
            (($(now_ms) > deadline)) && die "redis: no failover away from ${old} within ${2:-30}s"
            sleep 0.1
        done
        ;;
    start-redis)
        REDIS_CLI=$(need_bin redis-cli)
        start_redis_port "${1:?PORT}"
        ;;
    sql)
        valid_node "${1:-}"
        MARIADB=$(need_bin mariadb mysql)
        n=$1
        shift
        node_root "${n}" "$@"
        ;;
    *) usage ;;
    esac
}

main "$@"
