#!/usr/bin/env bash
# Installs what is missing, then builds and runs the test suite.
#   --ucx=system (default): the system's libucp (Debian 12's UCX 1.13);
#   --ucx=wheel: the UCX of the libucx-cu12 wheel that ensure-deps.sh installs into .venv (UCX 1.20),
#     through UCXX_TS_UCX_LIBDIR; optional test file names after it run only those files.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ucx=system
if [[ "${1:-}" == --ucx=* ]]; then ucx="${1#--ucx=}"; shift; fi
bash scripts/ensure-deps.sh
case "$ucx" in
  system) unset UCXX_TS_UCX_LIBDIR ;;
  wheel)
    UCXX_TS_UCX_LIBDIR="$(ls -d "$ROOT"/.venv/lib/python3*/site-packages/libucx/lib | head -n1)"
    export UCXX_TS_UCX_LIBDIR
    echo "[test] UCX from the wheel: UCXX_TS_UCX_LIBDIR=$UCXX_TS_UCX_LIBDIR" ;;
  *) echo "scripts/test.sh: --ucx=system or --ucx=wheel, not $ucx" >&2; exit 2 ;;
esac
if [[ $# -gt 0 ]]; then
  rm -rf build && npm run build && npm run build:test
  node --test --test-concurrency=1 --test-timeout=120000 "${@/#/build/test/}"
else
  npm test
fi
