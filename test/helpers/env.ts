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
