#!/bin/sh
# UCX 1.20.1 (libucx-cu12 wheel): fetching atomics never complete on an endpoint in PEER error-handling
# mode, in stock ucx_perftest (no ucxx-ts code): `ucp_fadd -e` hangs (killed after 20 s) over tcp and
# with the default transports, and the initiator logs "proto_reconfig.c: cannot find remote protocol
# for: ... amo_fetch into host memory". The same without -e (NONE mode) completes, and so does -e with
# UCX_PROTO_ENABLE=n (the v1 protocols). UCX 1.13.1's ucx_perftest completes every case.
#   sh peer_mode_atomics.sh [LIBDIR]     # LIBDIR: the wheel's libucx/lib; default: the system's UCX
LIBDIR=${1:-}
if [ -n "$LIBDIR" ]; then PERF=$LIBDIR/../bin/ucx_perftest; export LD_LIBRARY_PATH=$LIBDIR; else PERF=ucx_perftest; fi
port=13500
run() { # NAME ENV... -- PERFTEST ARGS
    name=$1; shift; port=$((port + 1))
    env "$@" timeout 25 "$PERF" -p $port $EXTRA >/dev/null 2>&1 & SPID=$!
    sleep 1
    env "$@" timeout 20 "$PERF" -p $port $EXTRA localhost -t ucp_fadd -n 1000 > /tmp/peer_mode_atomics.log 2>&1; rc=$?
    kill $SPID 2>/dev/null; wait $SPID 2>/dev/null
    echo "$name: rc=$rc $(grep -m1 -o 'Final:.*' /tmp/peer_mode_atomics.log | cut -c1-60)"
}
EXTRA=    run "ucp_fadd NONE, UCX_TLS=tcp" UCX_TLS=tcp
EXTRA=-e  run "ucp_fadd PEER (-e), UCX_TLS=tcp" UCX_TLS=tcp
EXTRA=-e  run "ucp_fadd PEER (-e), default transports" UCX_LOG_LEVEL=warn
EXTRA=-e  run "ucp_fadd PEER (-e), UCX_TLS=tcp UCX_PROTO_ENABLE=n" UCX_TLS=tcp UCX_PROTO_ENABLE=n
