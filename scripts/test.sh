#!/usr/bin/env bash
# Installs what is missing, then builds and runs the test suite.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/ensure-deps.sh
npm test
