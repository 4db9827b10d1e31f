#!/usr/bin/env bash
# The package as users get it: packs ucxx-ts (npm pack), installs the tarball into a fresh temporary
# project, type-checks a TypeScript program against the installed typings, runs it (a tag message and a
# put through real UCX), and runs the `ucxx-perf` bin through npx. Expects `npm run build` to have run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$ROOT"

# The typings are the API and nothing else: no member named with a leading '_', nothing @internal.
leaks="$(grep -rnE '^\s+(static |readonly |get |set |async )*_[A-Za-z][A-Za-z0-9]*\??[(:<]|@internal' dist --include='*.d.ts' || true)"
if [[ -n "$leaks" ]]; then
  echo "[check-package] internal members in the emitted typings:" >&2
  echo "$leaks" >&2
  exit 1
fi
echo "[check-package] typings hold no internal member"

tarball="$(npm pack --silent --pack-destination "$WORK" | tail -n 1)"
echo "[check-package] packed $tarball"
mkdir "$WORK/app"
cd "$WORK/app"
cat > package.json <<'JSON'
{ "name": "ucxx-ts-package-check", "version": "1.0.0", "private": true, "type": "module" }
JSON
npm install --no-audit --no-fund --prefer-offline --silent "$WORK/$tarball"
# The compiler and Node's typings come from this repository's devDependencies (pinned there).
ln -s "$ROOT/node_modules/@types" node_modules/@types

cat > tsconfig.json <<'JSON'
{
  "compilerOptions": {
    "target": "ES2022", "lib": ["ES2022", "ESNext.Disposable"], "module": "NodeNext",
    "moduleResolution": "NodeNext", "strict": true, "types": ["node"], "outDir": "out"
  },
  "include": ["main.ts"]
}
JSON
cat > main.ts <<'TS'
import {
  Context, createRemoteKeyFromSerialized, UcxError, type Endpoint, type RemoteKey, type TagRecvInfo,
} from 'ucxx-ts';

await using context = new Context();
const worker = context.createWorker();
const region = context.createMemoryHandle(4096);
using listener = worker.listen({ host: '127.0.0.1', port: 0 }, (endpoint: Endpoint) => {
  void endpoint.tagSend(region.createRemoteKey().serialize(), 1n);
});
const endpoint = await worker.connect('127.0.0.1', listener.port);
const buffer = new Uint8Array(1024);
const info: TagRecvInfo = await worker.tagRecv(buffer, 1n);
const key: RemoteKey = createRemoteKeyFromSerialized(endpoint, buffer.subarray(0, info.length));
await endpoint.memPut(new TextEncoder().encode('packed'), key, 100);
await endpoint.flush();
const seen = new TextDecoder().decode(region.view().subarray(100, 106));
if (seen !== 'packed') throw new UcxError(-1, `the put did not land: ${seen}`);
console.log('package check: OK');
await endpoint.close();
TS
node "$ROOT/node_modules/typescript/bin/tsc" -p tsconfig.json
echo "[check-package] type-checked a program against the installed package"
node out/main.js
npx --no-install ucxx-perf --local -p 0 -t tag_lat -s 8 -n 200 -w 20 >/dev/null
echo "[check-package] npx ucxx-perf ran"
