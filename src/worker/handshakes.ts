/**
 * Handshakes that a protocol plugin adds to `worker.connect()` and `worker.listen()`, chosen by their
 * `handshake` option (ucxx Python's is `'ucxx-python'`, registered by src/ucxx-python/). The core
 * names no plugin: it looks the option up here.
 */
import { InvalidArgumentError } from '../errors/misuse.js';
import { show } from '../internal/bytes.js';

/** What a plugin does in place of a plain connect or listen. `W` is the Worker. */
export interface Handshake<W> {
  connect(worker: W, host: string, port: number, options: object): Promise<unknown>;
  listen(worker: W, options: object, onConnection: ((endpoint: never) => void) | undefined): unknown;
}

const handshakes = new Map<string, Handshake<never>>();

/** Makes `{ handshake: name }` run `handshake` (a plugin calls this once, when it loads). */
export function registerHandshake<W>(name: string, handshake: Handshake<W>): void {
  handshakes.set(name, handshake as Handshake<never>);
}

/** The handshake registered as `name`; an InvalidArgumentError names the known ones otherwise. */
export function handshakeNamed<W>(name: unknown): Handshake<W> {
  const found = typeof name === 'string' ? handshakes.get(name) : undefined;
  if (found === undefined) {
    throw new InvalidArgumentError(`unknown handshake ${show(name)}; known: ${[...handshakes.keys()].map((k) => `'${k}'`).join(', ') || 'none'}`);
  }
  return found as unknown as Handshake<W>;
}
