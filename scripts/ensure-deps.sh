#!/usr/bin/env bash
# Installs what ucxx-ts needs on a Debian 12 machine, only where it is missing (idempotent):
#   - Node.js >= 20 must already be there (checked, not installed);
#   - apt: libucx0 (libucp), libucx-dev + gcc + g++ + libc6-dev (the tests compile C probes and peers,
#     and a C++ peer against the libucxx wheel),
#     ucx-utils (ucx_info), iproute2 (ip) and util-linux (unshare, nsenter) for the two-host tests;
#   - npm ci when node_modules does not match package-lock.json.
# Runs as root, or through sudo when not root.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { echo "[ensure-deps] $*"; }
die() { echo "[ensure-deps] ERROR: $*" >&2; exit 1; }

# ---- Node.js ------------------------------------------------------------------------------------------
command -v node >/dev/null 2>&1 || die "Node.js is not installed; ucxx-ts needs Node >= 20 (https://nodejs.org/)"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[[ "$node_major" =~ ^[0-9]+$ && "$node_major" -ge 20 ]] \
  || die "Node.js $(node --version) is too old; ucxx-ts needs Node >= 20"
command -v npm >/dev/null 2>&1 || die "npm is not installed (it comes with Node.js >= 20)"
log "node $(node --version), npm $(npm --version)"

# ---- apt packages -------------------------------------------------------------------------------------
missing=()
pkg_installed() { dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'; }
if command -v dpkg >/dev/null 2>&1; then
  for pkg in libucx0 libucx-dev ucx-utils libc6-dev; do
    pkg_installed "$pkg" || missing+=("$pkg")
  done
  command -v gcc >/dev/null 2>&1 || missing+=(gcc)
  command -v g++ >/dev/null 2>&1 || missing+=(g++)
  # The two-host tests (network namespaces); util-linux is Essential on Debian but may be trimmed in images.
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  { command -v unshare && command -v nsenter; } >/dev/null 2>&1 || missing+=(util-linux)
else
  # Not Debian: accept a UCX installed some other way, else explain.
  command -v ucx_info >/dev/null 2>&1 && command -v gcc >/dev/null 2>&1 \
    || die "no dpkg here: install UCX (libucp, headers, ucx_info) and gcc yourself"
fi

if [[ ${#missing[@]} -gt 0 ]]; then
  SUDO=()
  if [[ "$(id -u)" -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "missing packages (${missing[*]}) and not root, and no sudo: install them as root"
    SUDO=(sudo)
  fi
  command -v apt-get >/dev/null 2>&1 || die "missing packages (${missing[*]}) and no apt-get"
  log "installing apt packages: ${missing[*]}"
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  log "apt packages installed"
else
  log "apt packages present (libucx0 libucx-dev ucx-utils gcc g++ libc6-dev iproute2 util-linux)"
fi

# ---- node_modules -------------------------------------------------------------------------------------
# The stamp holds the hash of the package-lock.json that node_modules was installed from.
[[ -f package-lock.json ]] || die "package-lock.json is missing in $ROOT"
STAMP=node_modules/.ucxx-ts-stamp
lock_hash="$(sha256sum package-lock.json | cut -d' ' -f1)"

# True when node_modules already holds every non-optional package of package-lock.json at its version
# (npm's own record, node_modules/.package-lock.json): adopts an install made without this script.
node_modules_match_lock() {
  node -e '
    const fs = require("fs");
    const want = JSON.parse(fs.readFileSync("package-lock.json", "utf8")).packages || {};
    const have = JSON.parse(fs.readFileSync("node_modules/.package-lock.json", "utf8")).packages || {};
    for (const [path, entry] of Object.entries(want)) {
      if (path === "" || entry.optional) continue;
      if (!have[path] || have[path].version !== entry.version || !fs.existsSync(path)) process.exit(1);
    }
  ' 2>/dev/null
}

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$lock_hash" ]]; then
  log "node_modules up to date"
elif [[ -d node_modules ]] && node_modules_match_lock; then
  echo "$lock_hash" > "$STAMP"
  log "node_modules matches package-lock.json"
else
  log "running npm ci"
  npm ci --no-audit --no-fund
  echo "$lock_hash" > "$STAMP"
  log "node_modules installed"
fi

# ---- the UCX that ucxx ships (the libucx-cu12 wheel), and ucxx itself --------------------------------
# A second UCX beside Debian's 1.13, pinned to what libucxx-cu12 0.52 accepts (>=1.19,<1.22), in a
# project-local venv; the tests use it when UCXX_TS_UCX_LIBDIR points at its lib/ (scripts/test.sh --ucx=wheel).
# Beside it, real ucxx as a test peer: ucxx-cu12 (Python) and libucxx-cu12 (the C++ library and headers),
# installed in the same pip call as the UCX pin so that they share that UCX (pip cannot pull another).
# The stamp holds the pins the venv was installed with, so a changed pin reinstalls.
UCX_WHEEL_PIN="libucx-cu12==1.20.1"
PY_PINS=("$UCX_WHEEL_PIN" "libucxx-cu12==0.52.0" "ucxx-cu12==0.52.0")
VENV="$ROOT/.venv"
VENV_STAMP="$VENV/.ucxx-ts-stamp"
if [[ -f "$VENV_STAMP" && "$(cat "$VENV_STAMP")" == "${PY_PINS[*]}" ]]; then
  log "Python wheels up to date (${PY_PINS[*]} in .venv)"
else
  command -v python3 >/dev/null 2>&1 || die "python3 is missing; it installs the UCX and ucxx wheels (${PY_PINS[*]})"
  if ! python3 -m venv --help >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || die "python3 has no venv module and there is no apt-get: install python3-venv"
    SUDO=()
    [[ "$(id -u)" -ne 0 ]] && SUDO=(sudo)
    log "installing python3-venv"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  fi
  [[ -x "$VENV/bin/pip" ]] || python3 -m venv "$VENV"
  log "installing ${PY_PINS[*]} into .venv"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "${PY_PINS[@]}"
  echo "${PY_PINS[*]}" > "$VENV_STAMP"
fi
UCX_WHEEL_LIBDIR="$(ls -d "$VENV"/lib/python3*/site-packages/libucx/lib 2>/dev/null | head -n1)"
[[ -n "$UCX_WHEEL_LIBDIR" && -e "$UCX_WHEEL_LIBDIR/libucp.so.0" ]] \
  || die "the UCX wheel in .venv has no libucx/lib/libucp.so.0; remove .venv and run again"
# Exactly one UCX in the venv, the pinned one (a second libucx-cu1x or a ucx-py bundling its own would
# give the ucxx peers another UCX than ucxx-ts's).
ucx_dists="$("$VENV/bin/pip" list --disable-pip-version-check --format=freeze 2>/dev/null | grep -iE '^(libucx-|ucx-py)' || true)"
[[ "$ucx_dists" == "$UCX_WHEEL_PIN" ]] \
  || die "the venv must hold exactly $UCX_WHEEL_PIN as its UCX, it holds: $(echo $ucx_dists); remove .venv and run again"
log "UCX wheel: UCXX_TS_UCX_LIBDIR=$UCX_WHEEL_LIBDIR"
