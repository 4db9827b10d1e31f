#!/bin/sh
# Driver for cross_release_accept.c (see its header): builds a server against the UCX of SERVER_LIBDIR
# and a client against CLIENT_LIBDIR (each with its include/ beside it; '' for the system's), then
# runs TRIES clients against one server in PEER mode and again in NONE mode, and counts what the
# server's ucp_ep_create made of the requests.
#   sh cross_release_accept.sh "$(ls -d .venv/lib/python3*/site-packages/libucx/lib)" '' 20
SERVER_LIBDIR=${1:-}; CLIENT_LIBDIR=${2:-}; TRIES=${3:-10}
DIR=$(cd "$(dirname "$0")" && pwd); BIN=${TMPDIR:-/tmp}/cross_release_accept
flags() { if [ -n "$1" ]; then echo "-I$1/../include -L$1 -Wl,-rpath,$1"; fi; }
gcc -O2 -Wall $(flags "$SERVER_LIBDIR") "$DIR/cross_release_accept.c" -o "$BIN.server" -lucp -lucs || exit 1
gcc -O2 -Wall $(flags "$CLIENT_LIBDIR") "$DIR/cross_release_accept.c" -o "$BIN.client" -lucp -lucs || exit 1
port=17310
for mode in peer none; do
    if [ $mode = none ]; then export NONE=1; else unset NONE; fi
    port=$((port + 1))
    "$BIN.server" server $port "$TRIES" >"$BIN.$mode.log" 2>&1 & SPID=$!
    sleep 1
    for t in $(seq 1 "$TRIES"); do timeout 10 "$BIN.client" client 127.0.0.1 $port >/dev/null 2>&1; sleep 1.2; done
    wait $SPID
    echo "$mode: $(grep '^server:' "$BIN.$mode.log")"
done
