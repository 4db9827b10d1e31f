#!/usr/bin/env bash
# Installs what is missing, then runs the RMA demo (two processes on loopback; see examples/rma-demo.ts).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/ensure-deps.sh
npm run demo
