#!/usr/bin/env bash
# Installs what is missing, then builds and runs the test suite.
#   bash scripts/test.sh                    the whole suite, this machine's node, the system's UCX (Debian 12's 1.13)
#   bash scripts/test.sh --node 24          on the pinned Node 24 (scripts/node-versions.sh installs it)
#   bash scripts/test.sh --quick            the quick part (npm run test:quick)
#   bash scripts/test.sh --ucx=wheel        on the UCX of the libucx-cu12 wheel that ensure-deps.sh installs
#                                           into .venv (UCX 1.20), through UCXX_TS_UCX_LIBDIR
#   bash scripts/test.sh [...] FILE...      only these test files (e.g. atomics.test.js)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
node_major=""
suite=test
ucx=system
files=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --node) node_major="${2:?--node needs a major version}"; shift 2 ;;
    --quick) suite=test:quick; shift ;;
    --ucx=*) ucx="${1#--ucx=}"; shift ;;
    -*) echo "usage: bash scripts/test.sh [--node MAJOR] [--quick] [--ucx=system|wheel] [FILE...]" >&2; exit 2 ;;
    *) files+=("$1"); shift ;;
  esac
done
bash scripts/ensure-deps.sh
case "$ucx" in
  system) unset UCXX_TS_UCX_LIBDIR ;;
  wheel)
    UCXX_TS_UCX_LIBDIR="$(ls -d "$ROOT"/.venv/lib/python3*/site-packages/libucx/lib | head -n1)"
    export UCXX_TS_UCX_LIBDIR
    echo "[test] UCX from the wheel: UCXX_TS_UCX_LIBDIR=$UCXX_TS_UCX_LIBDIR" ;;
  *) echo "scripts/test.sh: --ucx=system or --ucx=wheel, not $ucx" >&2; exit 2 ;;
esac
if [[ -n "$node_major" ]]; then
  bin="$(bash scripts/node-versions.sh "$node_major")"
  export PATH="$bin:$PATH"
fi
echo "[test] node $(node --version), UCX: $ucx"
if [[ ${#files[@]} -gt 0 ]]; then
  rm -rf build && npm run build && npm run build:test
  node --test --test-concurrency=1 --test-timeout=300000 "${files[@]/#/build/test/}"
else
  npm run "$suite"
fi
