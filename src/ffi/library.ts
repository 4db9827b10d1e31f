/**
 * Finds and loads libucp and libucs. Nothing outside src/ffi loads a library.
 *
 * Where: the directory named by `UCXX_TS_UCX_LIBDIR` when it is set (and only there: an explicit choice
 * must not silently fall back to another UCX), else the dynamic linker's own search path
 * (LD_LIBRARY_PATH, ld.so.cache), which is where Debian's `libucx0` puts them.
 */
import { readFileSync } from 'node:fs';
import koffi from 'koffi';
import * as path from 'node:path';
import { UCXX_TS_ERROR } from '../errors/brand.js';

export type LibraryHandle = ReturnType<typeof koffi.load>;

/**
 * Raised when libucp/libucs cannot be loaded; says what to install instead of a koffi stack trace.
 *
 * @example
 * ```ts
 * try {
 *   await using context = new Context();
 *   // ...
 * } catch (err) {
 *   if (err instanceof UcxLibraryNotFoundError) console.error(err.message); // says what to install
 *   else throw err;
 * }
 * ```
 */
export class UcxLibraryNotFoundError extends Error {
  /** @internal Marks it as ucxx-ts's (errors/brand.ts). */
  readonly [UCXX_TS_ERROR] = true;
  /** Always 'UcxLibraryNotFoundError'. */
  override readonly name = 'UcxLibraryNotFoundError';
  /** Always 'UCXX_ERR_LIBRARY_NOT_FOUND'. */
  readonly code = 'UCXX_ERR_LIBRARY_NOT_FOUND';
  constructor(library: string, tried: readonly string[], cause: unknown) {
    super(
      `ucxx-ts could not load ${library} (tried: ${tried.join(', ')}). ` +
        'Install UCX 1.13: on Debian 12 `apt-get install libucx0` ' +
        '(add libucx-dev ucx-utils for the tests and benchmarks), or UCX 1.20 from the libucx-cu12 wheel ' +
        '(`pip install libucx-cu12==1.20.1`), and set UCXX_TS_UCX_LIBDIR to the directory that holds ' +
        'libucp.so.0 and libucs.so.0 (the wheel\'s site-packages/libucx/lib).',
      { cause },
    );
  }
}

export { SUPPORTED_UCX, UnsupportedUcxVersionError, checkUcxVersion } from './ucx-versions.js';

function candidates(soname: string): string[] {
  const dir = process.env['UCXX_TS_UCX_LIBDIR'];
  if (dir !== undefined && dir !== '') return [path.join(dir, soname)];
  return [soname];
}

function loadOne(soname: string): LibraryHandle {
  const tried = candidates(soname);
  let lastError: unknown;
  for (const candidate of tried) {
    try {
      return koffi.load(candidate);
    } catch (err) {
      lastError = err;
    }
  }
  throw new UcxLibraryNotFoundError(soname, tried, lastError);
}

export interface UcxLibraries {
  readonly ucs: LibraryHandle;
  readonly ucp: LibraryHandle;
  readonly libc: LibraryHandle;
}

/**
 * UCX settings that a Node.js process needs, applied to this process's environment before UCX is loaded
 * (some are read by library constructors). Each is only a default: a variable the user set wins.
 *
 * - UCX's memory hooks (UCM) patch mmap/munmap/brk in libc at run time ("bistro") and replace malloc.
 *   V8's helper threads call mmap concurrently, and with the hooks on about 1 process start in 100 on a
 *   busy 2-core machine crashed inside V8's page allocator (0 in 300 without them). The hooks only serve
 *   UCX's registration cache for RDMA/GPU memory; without them UCX registers directly.
 * - UCX writes its log (warnings, errors) to stdout unless UCX_LOG_FILE names a file; libucs 1.13 takes
 *   "stdout" and "stderr" there as the streams themselves. A Node program's stdout is its output (piped
 *   into other programs, parsed as JSON), and diagnostics belong on stderr, as Node's own warnings are.
 *
 * Nothing here changes what a peer sees: a setting that changes lane selection (UCX_MM_ERROR_HANDLING,
 * for one) makes two processes choose different lanes for one connection, and UCX 1.13 then aborts in
 * wireup on the side that does not share it.
 *
 * @example
 * ```ts
 * new Context(); // loading UCX applied them, unless set already
 * for (const name of Object.keys(UCX_ENVIRONMENT_DEFAULTS)) console.log(`${name}=${process.env[name]}`);
 * ```
 */
export const UCX_ENVIRONMENT_DEFAULTS: Readonly<Record<string, string>> = {
  UCX_MEM_MMAP_HOOK_MODE: 'none',
  UCX_MEM_MALLOC_HOOKS: 'n',
  UCX_MEM_EVENTS: 'n',
  UCX_LOG_FILE: 'stderr',
};

function applyEnvironmentDefaults(): void {
  const env = process.env;
  for (const [name, value] of Object.entries(UCX_ENVIRONMENT_DEFAULTS)) {
    if (env[name] === undefined) env[name] = value;
  }
}

/**
 * The file of a loaded library whose name starts with `prefix` (e.g. 'libucp.so'), as /proc/self/maps
 * names it (symbolic links resolved), or undefined where there is no such mapping or no /proc.
 */
export function mappedLibraryPath(prefix: string): string | undefined {
  let maps: string;
  try {
    maps = readFileSync('/proc/self/maps', 'utf8');
  } catch {
    return undefined;
  }
  for (const line of maps.split('\n')) {
    const file = line.slice(line.indexOf('/'));
    if (line.includes('/') && path.basename(file).startsWith(prefix)) return file;
  }
  return undefined;
}

/** Loads libucs, then libucp (which depends on it), then libc for memstream-based config printing. */
export function loadLibraries(): UcxLibraries {
  applyEnvironmentDefaults();
  const ucs = loadOne('libucs.so.0');
  const ucp = loadOne('libucp.so.0');
  const libc = koffi.load('libc.so.6');
  return { ucs, ucp, libc };
}
