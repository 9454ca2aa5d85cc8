# proc.sh - helpers shared by services.sh and cluster.sh (sourced, not run):
# finding server binaries, probing ports, and trusting a pidfile only while
# its process is alive and has the expected name.

now_ms() { date +%s%3N; }

# Find a server binary even when /usr/sbin is not on a normal user's PATH.
find_bin() {
    local name dir
    for name in "$@"; do
        if command -v "${name}" >/dev/null 2>&1; then
            command -v "${name}"
            return 0
        fi
        for dir in /usr/sbin /usr/local/sbin /sbin /usr/bin /usr/local/bin; do
            if [[ -x "${dir}/${name}" ]]; then
                printf '%s\n' "${dir}/${name}"
                return 0
            fi
        done
    done
    return 1
}

# True when something already accepts TCP connections on 127.0.0.1:PORT.
port_busy() {
    # shellcheck disable=SC2016 # $1 is expanded by the inner bash
    timeout 1 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null
}

# whose PID 1 never reaps, a killed server would otherwise look alive forever.
proc_alive() {
    local pid=$1 state
    kill -0 "${pid}" 2>/dev/null || return 1
    if [[ -r "/proc/${pid}/stat" ]]; then
        state=$(sed 's/^.*) //' "/proc/${pid}/stat" 2>/dev/null | cut -d' ' -f1) || return 1
        [[ "${state}" != "Z" && "${state}" != "X" ]] || return 1
    fi
    return 0
}

# expected program (guards against a recycled pid after a reboot).
running_pid() {
    local pidfile=$1 comm=$2 pid actual
    [[ -s "${pidfile}" ]] || return 1
    pid=$(tr -d ' \n' <"${pidfile}")
    [[ "${pid}" =~ ^[0-9]+$ ]] || return 1
    proc_alive "${pid}" || return 1
    if [[ -r "/proc/${pid}/comm" ]]; then
        actual=$(cat "/proc/${pid}/comm" 2>/dev/null || true)
        [[ "${actual}" == "${comm}"* ]] || return 1
    fi
    printf '%s\n' "${pid}"
}
