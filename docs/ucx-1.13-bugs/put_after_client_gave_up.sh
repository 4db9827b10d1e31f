#!/bin/sh
# Driver for put_after_client_gave_up.c (see its header). Needs root (network namespaces).
#   sh put_after_client_gave_up.sh [stop|link] [TRIES] [SIZE] [OUTSTANDING] [GIVEUP_MS] [LINGER_S] [PAUSE_S]
# Builds the program into $TMPDIR (default /tmp), makes two namespaces hA (client, 10.77.0.1) and hB (server, 10.77.0.2),
# each run in its own UTS+IPC namespace so that UCX takes them for two hosts (TCP only), runs TRIES
# tries, prints one line per try and a count, and removes the namespaces again. Each try: start the
# server (hB), start the client (hA), 0.5 s into the puts SIGSTOP the server ('stop') or take vA down
# ('link'); the client gives up by itself after GIVEUP_MS without a completed put, force-closes its
# endpoint and exits; PAUSE_S later SIGCONT the server / bring vA up; wait for the server (it exits 0
# 3 s after its error callback, or after 25 s). Optional: SERVER_ENV / CLIENT_ENV = "VAR=value ..."
# for either side (both empty: UCX's defaults); LOGS = where the per-try logs go.
VARIANT=${1:-stop}; TRIES=${2:-10}; SIZE=${3:-65536}; NOUT=${4:-64}; GIVEUP_MS=${5:-1000}; LINGER=${6:-0}; PAUSE=${7:-0.5}
DIR=$(cd "$(dirname "$0")" && pwd); BIN=${TMPDIR:-/tmp}/put_after_client_gave_up
LOGS=${LOGS:-${TMPDIR:-/tmp}/put_after_client_gave_up.logs}
gcc -O2 -Wall "$DIR/put_after_client_gave_up.c" -o "$BIN" -lucp -lucs || exit 1
mkdir -p "$LOGS"

cleanup() {
    [ -n "$CPID" ] && kill -9 "$CPID" 2>/dev/null
    [ -n "$SPID" ] && { kill -CONT "$SPID" 2>/dev/null; kill -9 "$SPID" 2>/dev/null; }
    ip netns del hA 2>/dev/null; ip netns del hB 2>/dev/null
}
trap cleanup EXIT INT TERM
ip netns del hA 2>/dev/null; ip netns del hB 2>/dev/null
ip netns add hA && ip netns add hB || exit 1
ip link add vA type veth peer name vB
ip link set vA netns hA; ip link set vB netns hB
ip -n hA addr add 10.77.0.1/24 dev vA; ip -n hB addr add 10.77.0.2/24 dev vB
for n in hA hB; do ip -n $n link set lo up; done; ip -n hA link set vA up; ip -n hB link set vB up

wait_for() { # FILE PATTERN SECONDS
    i=0; while ! grep -q "$2" "$1" 2>/dev/null; do i=$((i + 1)); [ $i -gt $(($3 * 10)) ] && return 1; sleep 0.1; done
}

crashed=0; done_tries=0
for t in $(seq 1 "$TRIES"); do
    port=$((13000 + t)); slog=$LOGS/server.$VARIANT.$t.log; clog=$LOGS/client.$VARIANT.$t.log
    # The server: UCX's defaults (nothing set). The client: UCX's defaults too; it gives up by itself.
    ip netns exec hB unshare --uts --ipc sh -c "hostname hostb; exec env $SERVER_ENV nice -n 10 $BIN server $port 25" >"$slog" 2>&1 &
    SPID=$!
    wait_for "$slog" listening 10 || { echo "try $t: server did not start"; cat "$slog"; exit 1; }
    ip netns exec hA unshare --uts --ipc sh -c "hostname hosta; exec env $CLIENT_ENV nice -n 10 $BIN client 10.77.0.2 $port $SIZE $NOUT $GIVEUP_MS $LINGER" >"$clog" 2>&1 &
    CPID=$!
    wait_for "$clog" putting 10 || { echo "try $t: client did not connect"; cat "$clog" "$slog"; exit 1; }
    sleep 0.5
    if [ "$VARIANT" = stop ]; then kill -STOP "$SPID"; else ip -n hA link set vA down; fi
    wait "$CPID"; CPID=
    sleep "$PAUSE"
    if [ "$VARIANT" = stop ]; then kill -CONT "$SPID"; else ip -n hA link set vA up; fi
    wait "$SPID"; rc=$?; SPID=
    done_tries=$((done_tries + 1))
    if [ $rc -ne 0 ]; then
        crashed=$((crashed + 1))
        why=$(grep -m1 -o 'Fatal: .*\|Caught signal [0-9]* ([^)]*\|Assertion .*' "$slog")
        echo "try $t: server died, rc $rc: $why"
    else
        echo "try $t: $(tail -n 1 "$slog")"
    fi
done
echo "$VARIANT size=$SIZE outstanding=$NOUT giveup=${GIVEUP_MS}ms linger=${LINGER}s pause=${PAUSE}s: server crashed in $crashed of $done_tries tries (logs in $LOGS)"
