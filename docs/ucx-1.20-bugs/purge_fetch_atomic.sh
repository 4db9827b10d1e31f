#!/bin/sh
# Driver for purge_fetch_atomic.c (see its header): with the v1 protocols over TCP (UCX_TLS=tcp
# UCX_PROTO_ENABLE=n, both sides), a forced close of a PEER-mode endpoint purges a software-emulated
# fetching atomic that waits for its reply (the server is SIGSTOPped), and ucp_ep_req_purge calls
# ucp_request_send_buffer_dereg on a request whose send.datatype / send.state.dt the atomic never
# initialized: 1.20.1 -> ucp_memh_put(stale memh) SIGSEGV; 1.13.1 -> deregisters garbage from random MDs.
# Builds it against the UCX of LIBDIR (its include/ beside it; default: the system's), then runs TRIES
# tries of each MODE (stale: own request memory with a core-like stale pattern, zero: the same zeroed,
# pool: UCX's request mpool dirtied by earlier operations) and counts the client's deaths.
#   sh purge_fetch_atomic.sh [LIBDIR] [TRIES]
LIBDIR=${1:-}; TRIES=${2:-5}
DIR=$(cd "$(dirname "$0")" && pwd); BIN=${TMPDIR:-/tmp}/purge_fetch_atomic
if [ -n "$LIBDIR" ]; then FLAGS="-I$LIBDIR/../include -L$LIBDIR -Wl,-rpath,$LIBDIR"; else FLAGS=; fi
gcc -O2 -Wall $FLAGS "$DIR/purge_fetch_atomic.c" -o "$BIN" -lucp -lucs || exit 1
export UCX_TLS=tcp UCX_PROTO_ENABLE=n
port=15500
for mode in stale zero pool; do
    died=0; hung=0
    for t in $(seq 1 "$TRIES"); do
        port=$((port + 1)); [ $port -gt 15900 ] && port=15501
        LOG=$BIN.$mode.log
        "$BIN" server $port >"$BIN.server.log" 2>&1 & SPID=$!
        sleep 0.5
        rm -f "$LOG"; : >"$LOG"
        FLAG=$BIN.stopped; rm -f "$FLAG"
        STOPPED_FLAG=$FLAG timeout 60 "$BIN" client 127.0.0.1 $port $mode $t >"$LOG" 2>&1 & CPID=$!
        # Stop the server as soon as the client is ready (it then progresses 1 s before the atomic).
        i=0; while [ $i -lt 500 ] && ! grep -q '^ready' "$LOG" && kill -0 $CPID 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
        grep -q '^ready' "$LOG" && kill -STOP $SPID && touch "$FLAG"
        wait $CPID; rc=$?
        kill -9 $SPID 2>/dev/null; wait $SPID 2>/dev/null
        if [ $rc -eq 124 ]; then hung=$((hung + 1)); elif [ $rc -ne 0 ]; then died=$((died + 1)); cp "$LOG" "$BIN.$mode.died.log"; fi
        last=$(grep -o 'Caught signal [0-9]* ([^)]*\|Assertion.*\|failed to dereg.*\|survived.*' "$LOG" | tail -1)
        [ $rc -gt 128 ] && [ $rc -ne 124 ] && last="killed by SIG$(kill -l $((rc - 128)))${last:+ ($last)}"
        [ -n "$VERBOSE" ] && echo "  $mode try $t: rc=$rc ${last:-$(tail -1 "$LOG")} [$(grep -o "datatype.*" "$LOG")]"
    done
    echo "$mode: client died in $died of $TRIES tries${hung:+, hung (timeout) in $hung} (last: ${last:-$(tail -1 "$LOG")})"
done
