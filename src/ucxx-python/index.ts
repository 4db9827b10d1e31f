/**
 * Pairing with ucxx Python (`ucxx._lib_async`): its endpoint handshake and its message helpers.
 * See docs/ucxx-python.md.
 */
import type { EndpointOptions } from '../endpoint.js';
import type { Worker } from '../worker.js';
import { registerHandshake } from '../worker/handshakes.js';
import { UcxxPythonEndpoint } from './endpoint.js';
import { checkTimeout, exchangePeerInfo } from './handshake.js';
import { UcxxPythonListener, type UcxxPythonListenerOptions } from './listener.js';
import { InvalidArgumentError, INTERNAL } from '../errors/misuse.js';

export { HandshakeError, MessageFormatError, type HandshakeFailure } from './errors.js';
export {
  UcxxPythonEndpoint, type UcxxPythonTagOptions, type UcxxPythonRecvOptions, type UcxxPythonAllocatingRecvOptions,
  type UcxxPythonRecvObjOptions, type UcxxPythonProbeOptions,
} from './endpoint.js';
export { UcxxPythonListener, type UcxxPythonListenerOptions, type UcxxPythonListenerEvents } from './listener.js';
export { UCXX_PYTHON_FEATURES, DEFAULT_CONNECT_TIMEOUT_MS } from './handshake.js';
export { hash64bits, pyRepr, pyHashInt, encodePeerInfo, decodePeerInfo, PEER_INFO_BYTES, type PyValue } from './peer-info.js';

/** Options of `worker.connect()` that pair the endpoint with a ucxx Python listener. */
export interface UcxxPythonConnectOptions extends EndpointOptions {
  /** Run ucxx Python's endpoint handshake after connecting. */
  handshake: 'ucxx-python';
  /** How long each step of the handshake may take, in ms. Default 5000 (ucxx Python's 5 s). */
  connectTimeout?: number;
}

/** @internal `worker.connect(host, port, { handshake: 'ucxx-python' })`: connect, then the client side. */
export async function connectUcxxPython(
  worker: Worker, host: string, port: number, options: UcxxPythonConnectOptions,
): Promise<UcxxPythonEndpoint> {
  const { handshake, connectTimeout, ...plain } = options;
  if (handshake !== 'ucxx-python') throw new InvalidArgumentError(`unknown handshake ${JSON.stringify(handshake)}`);
  const timeoutMs = checkTimeout(connectTimeout);
  // ucxx Python servers ask for peer error handling on the endpoints they accept, and refuse another mode.
  const endpoint = await worker.connect(host, port, { errorHandling: 'peer', ...plain });
  return new UcxxPythonEndpoint(INTERNAL, endpoint, await exchangePeerInfo(endpoint, 'client', timeoutMs));
}

/** @internal `worker.listen({ ..., handshake: 'ucxx-python' })`. */
export function listenUcxxPython(
  worker: Worker, options: UcxxPythonListenerOptions, onConnection?: (endpoint: UcxxPythonEndpoint) => void,
): UcxxPythonListener {
  return new UcxxPythonListener(INTERNAL, worker, options, onConnection);
}

registerHandshake<Worker>('ucxx-python', {
  connect: (worker, host, port, options) => connectUcxxPython(worker, host, port, options as UcxxPythonConnectOptions),
  listen: (worker, options, onConnection) =>
    listenUcxxPython(worker, options as UcxxPythonListenerOptions, onConnection as ((endpoint: UcxxPythonEndpoint) => void) | undefined),
});

declare module '../worker.js' {
  interface Worker {
    /**
     * Starts a listener whose accepted connections run ucxx Python's endpoint handshake first; each is
     * handed out as a `UcxxPythonEndpoint` (see docs/ucxx-python.md).
     *
     * @example
     * ```ts
     * const listener = worker.listen({ port: 0, handshake: 'ucxx-python' }, (ep) => void ep.send(hello));
     * ```
     */
    listen(options: UcxxPythonListenerOptions, onConnection?: (endpoint: UcxxPythonEndpoint) => void): UcxxPythonListener;
    /**
     * Connects, then runs ucxx Python's endpoint handshake with the listener there (a ucxx Python
     * `create_listener` server); resolves with a `UcxxPythonEndpoint`.
     *
     * @example
     * ```ts
     * const ep = await worker.connect('127.0.0.1', port, { handshake: 'ucxx-python' });
     * ```
     */
    connect(host: string, port: number, options: UcxxPythonConnectOptions): Promise<UcxxPythonEndpoint>;
  }
}
