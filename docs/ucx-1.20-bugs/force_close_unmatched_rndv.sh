#!/bin/sh
# Driver for force_close_unmatched_rndv.c (see its header): builds it against the UCX of LIBDIR (its
# include/ beside it; default: the system's), then runs TRIES tries of each way of closing and counts
# the client's deaths.   sh force_close_unmatched_rndv.sh [LIBDIR] [TRIES]
LIBDIR=${1:-}; TRIES=${2:-5}
DIR=$(cd "$(dirname "$0")" && pwd); BIN=${TMPDIR:-/tmp}/force_close_unmatched_rndv
if [ -n "$LIBDIR" ]; then FLAGS="-I$LIBDIR/../include -L$LIBDIR -Wl,-rpath,$LIBDIR"; else FLAGS=; fi
gcc -O2 -Wall $FLAGS "$DIR/force_close_unmatched_rndv.c" -o "$BIN" -lucp -lucs || exit 1
for how in force cancel flush; do
    died=0
    for t in $(seq 1 "$TRIES"); do
        port=$((15000 + t + 100 * $(echo "$how" | wc -c)))
        "$BIN" server $port >/dev/null 2>&1 & SPID=$!
        sleep 0.5
        timeout 30 "$BIN" client 127.0.0.1 $port 4194304 $how >"$BIN.$how.log" 2>&1; rc=$?
        kill -9 $SPID 2>/dev/null; wait $SPID 2>/dev/null
        [ $rc -ne 0 ] && died=$((died + 1))
    done
    echo "$how: client died in $died of $TRIES tries (last: $(grep -m1 -o 'Caught signal [0-9]* ([^)]*\|survived.*' "$BIN.$how.log"))"
done
