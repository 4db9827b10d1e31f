/**
 * Real ucxx as a test peer: the ucxx-cu12 (Python) and libucxx-cu12 (C++ headers and library) wheels
 * that scripts/ensure-deps.sh installs into .venv beside the libucx-cu12 wheel. `ucxxGate` decides
 * whether a test can run: it skips (with the reason) when this run's UCX is not a release ucxx 0.52
 * accepts, and, when the wheels are missing, skips or (UCXX_TS_REQUIRE_UCXX=1, as on CI) fails.
 * `compileUcxxPeer` builds a C++ program from test/cpp against the wheels, with an rpath to the wheel's
 * libucxx and libucx (an RPATH, not a RUNPATH, so that libucxx's own libucp comes from the wheel too:
 * the peers run with PATH only).
 */
import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestContext } from 'node:test';
import { ucxLibDir } from './env.js';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const CPP_SOURCES = join(ROOT, 'test', 'cpp');

export interface UcxxWheel {
  sitePackages: string;
  python: string;
  libucxxInclude: string;
  libucxxLib: string;
  libucxInclude: string;
  libucxLib: string;
}

/** .venv's site-packages (lib/python3.N/site-packages). */
function venvSitePackages(): string {
  const lib = join(ROOT, '.venv', 'lib');
  const python = existsSync(lib) ? readdirSync(lib).find((name) => name.startsWith('python3')) : undefined;
  return join(lib, python ?? 'python3', 'site-packages');
}

/** Where the ucxx wheels are (the site-packages of this run's libucx wheel, else .venv's), or why not. */
export function findUcxxWheel(): UcxxWheel | string {
  const libdir = ucxLibDir();
  const sitePackages = libdir !== undefined ? resolve(libdir, '..', '..') : venvSitePackages();
  const wheel: UcxxWheel = {
    sitePackages,
    python: resolve(sitePackages, '..', '..', '..', 'bin', 'python'),
    libucxxInclude: join(sitePackages, 'libucxx', 'include'),
    libucxxLib: join(sitePackages, 'libucxx', 'lib64'),
    libucxInclude: join(sitePackages, 'libucx', 'include'),
    libucxLib: join(sitePackages, 'libucx', 'lib'),
  };
  const needed = [
    join(wheel.libucxxInclude, 'ucxx', 'api.h'), join(wheel.libucxxLib, 'libucxx.so'),
    join(wheel.libucxInclude, 'ucp', 'api', 'ucp.h'), join(wheel.libucxLib, 'libucp.so'),
    join(sitePackages, 'ucxx', '__init__.py'), wheel.python,
  ];
  const missing = needed.filter((path) => !existsSync(path));
  if (missing.length > 0) {
    return `the ucxx wheels (ucxx-cu12, libucxx-cu12 0.52 beside libucx-cu12) are not installed: missing ${missing.join(', ')} ` +
      '(bash scripts/ensure-deps.sh installs them into .venv)';
  }
  return wheel;
}

/**
 * The wheels, or undefined after `t.skip(reason)`: skips when the UCX of this run is not 1.19 or 1.20
 * (ucxx 0.52's libucx-cu12 range this project tests), and when the wheels are missing, unless
 * UCXX_TS_REQUIRE_UCXX=1: then a missing wheel fails the test.
 */
export function ucxxGate(t: TestContext, version: readonly [number, number, number]): UcxxWheel | undefined {
  const [major, minor] = version;
  if (major !== 1 || (minor !== 19 && minor !== 20)) {
    t.skip(`real ucxx 0.52 runs on UCX 1.19-1.20 (the libucx-cu12 wheel); this run loaded UCX ${version.join('.')}: ` +
      'run with scripts/test.sh --ucx=wheel');
    return undefined;
  }
  const wheel = findUcxxWheel();
  if (typeof wheel === 'string') {
    if (process.env['UCXX_TS_REQUIRE_UCXX'] === '1') assert.fail(`UCXX_TS_REQUIRE_UCXX=1 but ${wheel}`);
    t.skip(wheel);
    return undefined;
  }
  return wheel;
}

const binaries = new Map<string, string>();

/**
 * g++'s include, library and link arguments for a program on libucxx from the wheels: an RPATH (not a
 * RUNPATH) to the wheel's libucxx and libucx, so that libucxx's own libucp comes from the wheel too.
 */
export function ucxxLinkArgs(wheel: UcxxWheel): string[] {
  return [
    `-isystem${wheel.libucxxInclude}`, `-isystem${wheel.libucxInclude}`, `-L${wheel.libucxxLib}`, `-L${wheel.libucxLib}`,
    '-lucxx', '-lucp', '-lucs', '-Wl,--disable-new-dtags', `-Wl,-rpath,${wheel.libucxxLib}:${wheel.libucxLib}`,
  ];
}

/** Compiles test/cpp/<name>.cpp once per run against the ucxx and UCX wheels; fails with g++'s output. */
export function compileUcxxPeer(wheel: UcxxWheel, name: string): string {
  const cached = binaries.get(name);
  if (cached !== undefined) return cached;
  const source = join(CPP_SOURCES, `${name}.cpp`);
  const dir = mkdtempSync(join(tmpdir(), `ucxx-ts-${name}-`));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const out = join(dir, name);
  try {
    execFileSync('g++', [
      '-std=c++17', '-O1', '-Wall', '-Wextra', '-fdiagnostics-color=never', source, '-o', out, ...ucxxLinkArgs(wheel),
    ], { stdio: 'pipe', timeout: 120_000 });
  } catch (err) {
    const e = err as { code?: string; stderr?: Buffer; message?: string };
    assert.fail(e.code === 'ENOENT' ? 'g++ was not found on PATH (scripts/ensure-deps.sh installs it)'
      : `g++ could not build ${source}:\n${e.stderr?.toString() || String(e.message)}`);
  }
  binaries.set(name, out);
  return out;
}
