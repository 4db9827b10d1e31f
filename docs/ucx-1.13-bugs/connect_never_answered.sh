#!/bin/sh
# Driver for connect_never_answered.c (see its header): TRIES runs of each client variant (plain,
# shutdown, peer) against a server that listens, never progresses and is SIGSTOPped; one line per run
# and a count per variant.   sh connect_never_answered.sh [TRIES]
TRIES=${1:-10}
DIR=$(cd "$(dirname "$0")" && pwd); BIN=${TMPDIR:-/tmp}/connect_never_answered; LOG=${TMPDIR:-/tmp}/connect_never_answered.log
gcc -O2 -Wall "$DIR/connect_never_answered.c" -o "$BIN" -lucp -lucs || exit 1
for variant in plain shutdown peer; do
    aborted=0; runs=0
    for t in $(seq 1 "$TRIES"); do
        port=$((20000 + ($$ % 2000) * 10 + t % 10))
        "$BIN" server $port >"$LOG.server" 2>&1 &
        SPID=$!
        i=0; while ! grep -q listening "$LOG.server" 2>/dev/null; do i=$((i + 1)); [ $i -gt 50 ] && break; sleep 0.1; done
        kill -STOP $SPID
        "$BIN" client 127.0.0.1 $port $variant >"$LOG" 2>&1; rc=$?
        kill -CONT $SPID; kill -9 $SPID; wait $SPID 2>/dev/null
        [ $rc -eq 3 ] && { echo "$variant $t: the connect failed by itself (port taken?), not counted"; continue; }
        [ $rc -ne 0 ] && aborted=$((aborted + 1))
        runs=$((runs + 1))
        echo "$variant $t: exit $rc: $(grep -m1 -o 'Bug: .*flushed\|clean exit' "$LOG")"
    done
    echo "$variant: $aborted of $runs runs aborted"
done
