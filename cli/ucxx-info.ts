#!/usr/bin/env node
/**
 * ucxx-info: what UCX sees from this process, as `ucx_info` shows it for a C program: the UCX version,
 * the library it was loaded from (and why that one), the transports and devices a context opens, the effective configuration, and what ucxx-ts itself
 * sets or chooses.
 *
 *   ucxx-info              everything, as text
 *   ucxx-info --json       the same as one JSON object
 *   ucxx-info -c           the effective configuration only (UCX_NAME=value lines)
 *   ucxx-info --features stream,wakeup  a context with these features instead of all of them
 */
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import { Context, DEFAULT_FEATURES, UCX_ENVIRONMENT_DEFAULTS, getDefaultErrorHandling, getUcxLibrary, getUcxVersion, type Feature } from 'ucxx-ts';

const USAGE = `usage: ucxx-info [--json] [-c|--config] [--features LIST]
  --json             one JSON object
  -c, --config       the effective UCX configuration only
  --features LIST    the context's features (default: ${DEFAULT_FEATURES.join(',')})
  -h, --help         this text`;

function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return manifest.version;
}

async function main(): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        json: { type: 'boolean' },
        config: { type: 'boolean', short: 'c' },
        features: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    console.error(`ucxx-info: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help === true) {
    console.log(USAGE);
    return 0;
  }
  const features = values.features === undefined ? DEFAULT_FEATURES : values.features.split(',') as Feature[];
  await using context = new Context({ features });
  const config = context.getConfig();
  if (values.config === true) {
    for (const [name, value] of Object.entries(config)) console.log(`UCX_${name}=${value}`);
    return 0;
  }
  const [major, minor, release] = getUcxVersion();
  const environment = Object.entries(UCX_ENVIRONMENT_DEFAULTS).map(([name, value]) => ({
    name, value: process.env[name] ?? value, setBy: process.env[name] === value ? 'ucxx-ts (default)' : 'you',
  }));
  const info = {
    ucxxTs: packageVersion(),
    ucx: `${major}.${minor}.${release}`,
    ucxLibrary: getUcxLibrary(),
    features: context.features,
    resources: context.getResources(),
    environment,
    errorHandling: getDefaultErrorHandling() === 'peer'
      ? "'auto': UCP PEER mode for every peer (as ucxx; TCP to a peer on this host); { errorHandling: 'none' } uses shared memory"
      : "'auto': UCP NONE mode for a peer on this host (shared memory), PEER for a remote one",
    config,
  };
  if (values.json === true) {
    console.log(JSON.stringify(info, null, 2));
    return 0;
  }
  console.log(`# ucxx-ts ${info.ucxxTs} on UCX ${info.ucx}`);
  console.log(`# libucp: ${info.ucxLibrary.path} (${info.ucxLibrary.from === 'system' ? 'the system library path; ' +
    'UCXX_TS_UCX_LIBDIR=DIR chooses another' : 'from UCXX_TS_UCX_LIBDIR'})`);
  console.log(`# context features: ${info.features.join(', ')}`);
  console.log('#');
  console.log('# transports and devices (transport/device, memory domain):');
  for (const r of info.resources) console.log(`#   ${`${r.transport}/${r.device}`.padEnd(24)} md ${r.md} (${r.component})`);
  console.log('#');
  console.log('# what ucxx-ts sets in its process environment (a variable you set wins):');
  for (const e of info.environment) console.log(`#   ${e.name}=${e.value}`.padEnd(40) + ` set by ${e.setBy}`);
  console.log(`# endpoints: errorHandling ${info.errorHandling}`);
  console.log('#');
  console.log('# effective configuration:');
  for (const [name, value] of Object.entries(config)) console.log(`UCX_${name}=${value}`);
  return 0;
}

main().then((code) => { process.exitCode = code; }, (err: unknown) => {
  console.error(`ucxx-info: ${(err as Error).message ?? String(err)}`);
  process.exitCode = 1;
});
