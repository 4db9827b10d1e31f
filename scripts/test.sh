#!/usr/bin/env bash
# Installs what is missing, then builds and runs the test suite.
#   bash scripts/test.sh                   the whole suite on this machine's node
#   bash scripts/test.sh --node 24         the whole suite on the pinned Node 24 (scripts/node-versions.sh)
#   bash scripts/test.sh --node 26 --quick the quick part (npm run test:quick) on Node 26
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
node_major=""
suite=test
while [[ $# -gt 0 ]]; do
  case "$1" in
    --node) node_major="${2:?--node needs a major version}"; shift 2 ;;
    --quick) suite=test:quick; shift ;;
    *) echo "usage: bash scripts/test.sh [--node MAJOR] [--quick]" >&2; exit 2 ;;
  esac
done
bash scripts/ensure-deps.sh
if [[ -n "$node_major" ]]; then
  bin="$(bash scripts/node-versions.sh "$node_major")"
  export PATH="$bin:$PATH"
fi
echo "[test] node $(node --version): npm run $suite"
npm run "$suite"
