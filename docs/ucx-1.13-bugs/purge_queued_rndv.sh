#!/bin/sh
# Driver for purge_queued_rndv.c (see its header). Needs root (network namespaces).
#   sh purge_queued_rndv.sh [tag|get] [malloc|map] [N] [SIZE] [force|forcewait|flush|destroy] [TRIES] [STOP_DELAY_S]
# Builds the program into $TMPDIR (default /tmp), makes two namespaces hA (client, 10.77.0.1) and hB
# (server, 10.77.0.2), each run in its own UTS+IPC namespace so that UCX takes them for two hosts (TCP
# only), and runs TRIES tries: start the server, start the client, STOP_DELAY_S after the client has
# posted its N operations SIGSTOP the server, let the client give up and tear down, then kill the
# server. Counts the tries in which the CLIENT died. Optional: SERVER_ENV / CLIENT_ENV = "VAR=value ..."
# (both empty: UCX's defaults); LOGS = where the per-try logs go.
OP=${1:-tag}; MEM=${2:-malloc}; N=${3:-128}; SIZE=${4:-2097152}; CLOSE=${5:-force}; TRIES=${6:-20}; DELAY=${7:-0.2}
DIR=$(cd "$(dirname "$0")" && pwd); BIN=${TMPDIR:-/tmp}/purge_queued_rndv
LOGS=${LOGS:-${TMPDIR:-/tmp}/purge_queued_rndv.logs}
gcc -O2 -Wall "$DIR/purge_queued_rndv.c" -o "$BIN" -lucp -lucs || exit 1
mkdir -p "$LOGS"

cleanup() {
    [ -n "$CPID" ] && kill -9 "$CPID" 2>/dev/null
    [ -n "$SPID" ] && { kill -9 "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; }
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
    port=$((14000 + t)); tag=$OP.$MEM.$N.$SIZE.$CLOSE.$t
    slog=$LOGS/server.$tag.log; clog=$LOGS/client.$tag.log
    ip netns exec hB unshare --uts --ipc sh -c "hostname hostb; exec env $SERVER_ENV nice -n 10 $BIN server $port" >"$slog" 2>&1 &
    SPID=$!
    wait_for "$slog" listening 10 || { echo "try $t: server did not start"; cat "$slog"; exit 1; }
    ip netns exec hA unshare --uts --ipc sh -c "hostname hosta; exec env $CLIENT_ENV nice -n 10 $BIN client 10.77.0.2 $port $OP $MEM $N $SIZE $CLOSE" >"$clog" 2>&1 &
    CPID=$!
    wait_for "$clog" posted 20 || { echo "try $t: client did not post"; cat "$clog" "$slog"; exit 1; }
    sleep "$DELAY"
    kill -STOP "$SPID"
    wait "$CPID"; rc=$?; CPID=
    kill -9 "$SPID"; wait "$SPID" 2>/dev/null; SPID=
    done_tries=$((done_tries + 1))
    if [ $rc -ne 0 ]; then
        crashed=$((crashed + 1))
        why=$(grep -m1 -o 'Fatal: .*\|Caught signal [0-9]* ([^)]*\|Assertion .*\|failed to dereg.*' "$clog")
        echo "try $t: client died, rc $rc: $why"
    else
        echo "try $t: $(grep -m1 'closing' "$clog")"
    fi
done
echo "$OP $MEM N=$N size=$SIZE close=$CLOSE stop_delay=${DELAY}s: client crashed in $crashed of $done_tries tries (logs in $LOGS)"
