import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { profileFor, type UcxProfile } from '#ucxx-ts/ffi/ucx-versions.js';

/**
 * The environment a spawned peer gets: what a process needs to run (PATH, HOME, locale, temp dir, and
 * where UCX was loaded from when the run chose a library), and no UCX_* variable of this process. A
 * test that is about a UCX setting passes it explicitly.
 */
const KEEP = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TMPDIR', 'LD_LIBRARY_PATH', 'UCXX_TS_UCX_LIBDIR', 'NODE_PATH'];

export function peerEnvironment(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const name of KEEP) if (process.env[name] !== undefined) env[name] = process.env[name];
  return { ...env, ...extra };
}

/**
 * The UCX library directory this run uses: UCXX_TS_UCX_LIBDIR (e.g. the libucx-cu12 wheel's
 * site-packages/libucx/lib), or undefined for the system's UCX (Debian's in /usr).
 */
export function ucxLibDir(): string | undefined {
  const dir = process.env['UCXX_TS_UCX_LIBDIR'];
  return dir === undefined || dir === '' ? undefined : dir;
}

/** The headers of the UCX this run uses: the wheel's include/ beside its lib/, or /usr/include. */
export function ucxIncludeDir(): string {
  const dir = ucxLibDir();
  return dir === undefined ? '/usr/include' : join(dirname(dir), 'include');
}

/**
 * gcc flags that build a C program against the UCX this run uses and link it to libucp/libucs: for a
 * UCXX_TS_UCX_LIBDIR, its headers, the directory and an rpath (C peers run with PATH only, so the rpath
 * is what makes them load the same UCX as ucxx-ts). The headers are system headers (-isystem), as
 * /usr/include is: UCX 1.20's warn under the peers' -Wall -Werror (UCS_MASK's `?:` mixes signedness).
 */
export function ucxCompileFlags(): string[] {
  const dir = ucxLibDir();
  const libs = ['-lucp', '-lucs'];
  return dir === undefined ? libs : [`-isystem${ucxIncludeDir()}`, `-L${dir}`, `-Wl,-rpath,${dir}`, ...libs];
}

/** Include flags only (for a program that needs UCX's headers but not its libraries). */
export function ucxIncludeFlags(): string[] {
  return ucxLibDir() === undefined ? [] : [`-isystem${ucxIncludeDir()}`];
}

/**
 * A stock UCX program (ucx_perftest, ucx_info) of the UCX this run uses: the wheel's bin/ beside its
 * lib/ when it has the program, else the name (found on PATH: Debian's ucx-utils).
 */
export function ucxTool(name: string): string {
  const dir = ucxLibDir();
  if (dir === undefined) return name;
  const candidate = join(dirname(dir), 'bin', name);
  return existsSync(candidate) ? candidate : name;
}

/**
 * The profile (src/ffi/ucx-versions.ts) of a UCX version, for tests whose expectations depend on the
 * version: pass `getUcxVersion()` of the package (this module imports no library: a test that loads
 * src/ffi itself must not load the package's copy too).
 */
export function ucxProfileOfRun(version: readonly [number, number, number]): UcxProfile {
  return profileFor(version);
}

/**
 * The environment a stock UCX peer (a C program, ucx_perftest) needs, beyond UCX's defaults, to initiate
 * fetching atomics on a PEER-mode endpoint on this run's UCX: UCX_PROTO_ENABLE=n where its v2 protocols
 * never complete them (UcxProfile.unavoidableBugs.peerModeFetchAtomicsHang); nothing elsewhere.
 */
export function peerAtomicsEnvironment(version: readonly [number, number, number]): NodeJS.ProcessEnv {
  return profileFor(version).unavoidableBugs.peerModeFetchAtomicsHang ? { UCX_PROTO_ENABLE: 'n' } : {};
}
