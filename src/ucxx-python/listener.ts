/**
 * A listener whose connections run ucxx Python's handshake (as the listener side) before they are handed
 * out, as ucxx Python's `create_listener` does before calling its callback.
 */
import { EventEmitter } from 'node:events';
import type { Listener, ListenerOptions } from '../listener.js';
import type { Endpoint } from '../endpoint.js';
import type { Worker } from '../worker.js';
import { HandshakeError } from './errors.js';
import { UcxxPythonEndpoint } from './endpoint.js';
import { checkTimeout, exchangePeerInfo } from './handshake.js';
import { InvalidArgumentError, INTERNAL, checkConstructorToken } from '../errors/misuse.js';

/** Options of `worker.listen()` whose endpoints pair with ucxx Python clients. */
export interface UcxxPythonListenerOptions extends ListenerOptions {
  /** Run ucxx Python's endpoint handshake on every accepted connection. */
  handshake: 'ucxx-python';
  /** How long each step of the handshake may take, in ms. Default 5000 (ucxx Python's 5 s). */
  connectTimeout?: number;
}

/** The events of a UcxxPythonListener. */
export interface UcxxPythonListenerEvents {
  /** A connection whose handshake failed; its endpoint is already closed. */
  handshakeError: [error: HandshakeError];
}

/**
 * A listener whose accepted endpoints run ucxx Python's handshake before they are handed out; a
 * failed handshake is a `'handshakeError'` event.
 *
 * @example
 * ```ts
 * const listener = worker.listen({ port: 0, handshake: 'ucxx-python' });
 * for await (const ep of listener) ep.send(hello);
 * ```
 */
export class UcxxPythonListener extends EventEmitter<UcxxPythonListenerEvents>
  implements AsyncIterable<UcxxPythonEndpoint>, Disposable {
  /** The plain listener underneath. */
  readonly listener: Listener;
  readonly #onConnection: ((endpoint: UcxxPythonEndpoint) => void) | undefined;
  readonly #queue: UcxxPythonEndpoint[] = [];
  readonly #waiting: ((result: IteratorResult<UcxxPythonEndpoint>) => void)[] = [];
  #iterated = false;

  /** @internal Use `worker.listen({ ..., handshake: 'ucxx-python' })`. */
  constructor(
    token: typeof INTERNAL, worker: Worker, options: UcxxPythonListenerOptions,
    onConnection?: (endpoint: UcxxPythonEndpoint) => void,
  ) {
    checkConstructorToken(token, 'UcxxPythonListener', "worker.listen({ ..., handshake: 'ucxx-python' })");
    super();
    if (onConnection !== undefined && typeof onConnection !== 'function') {
      throw new InvalidArgumentError('onConnection must be a function');
    }
    const { handshake, connectTimeout, ...plain } = options;
    if (handshake !== 'ucxx-python') throw new InvalidArgumentError(`unknown handshake ${JSON.stringify(handshake)}`);
    const timeoutMs = checkTimeout(connectTimeout);
    this.#onConnection = onConnection;
    this.listener = worker.listen(plain, (endpoint) => void this.#handshake(endpoint, timeoutMs));
  }

  async #handshake(endpoint: Endpoint, timeoutMs: number): Promise<void> {
    let tags;
    try {
      tags = await exchangePeerInfo(endpoint, 'listener', timeoutMs);
    } catch (err) {
      if (err instanceof HandshakeError && this.listenerCount('handshakeError') > 0) this.emit('handshakeError', err);
      return;
    }
    const ready = new UcxxPythonEndpoint(INTERNAL, endpoint, tags);
    if (this.listener.closed) {
      await ready.close();
      return;
    }
    if (!endpoint.closed) {
      this.#active++;
      endpoint.once('close', () => { this.#active--; });
    }
    this.#onConnection?.(ready);
    const waiter = this.#waiting.shift();
    if (waiter !== undefined) waiter({ value: ready, done: false });
    else if (this.#iterated || this.#onConnection === undefined) this.#queue.push(ready);
  }

  /** Endpoints handed out (their handshake done) and not closed yet. */
  #active = 0;

  /**
   * ucxx Python's `listener.active_clients`: the clients being served, here the endpoints this listener
   * handed out that are not closed yet.
   *
   * @example
   * ```ts
   * console.log(`${pyListener.activeClients} clients connected`);
   * ```
   */
  get activeClients(): number {
    return this.#active;
  }

  /** The port the listener is bound to. */
  get port(): number {
    return this.listener.port;
  }

  /** The address the listener is bound to. */
  get host(): string {
    return this.listener.host;
  }

  /** True once closed. */
  get closed(): boolean {
    return this.listener.closed;
  }

  /** Yields each connection once its handshake has succeeded, until the listener closes. */
  [Symbol.asyncIterator](): AsyncIterator<UcxxPythonEndpoint> {
    this.#iterated = true;
    return {
      next: (): Promise<IteratorResult<UcxxPythonEndpoint>> => {
        const ready = this.#queue.shift();
        if (ready !== undefined) return Promise.resolve({ value: ready, done: false });
        if (this.listener.closed) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => this.#waiting.push(resolve));
      },
      return: (): Promise<IteratorResult<UcxxPythonEndpoint>> => {
        this.close();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }

  /**
   * Stops accepting connections; established endpoints stay open. Idempotent.
   *
   * @example
   * ```ts
   * const listener = worker.listen({ port: 0, handshake: 'ucxx-python' });
   * listener.on('handshakeError', (err) => console.warn('handshake failed:', err.reason));
   * // ...
   * listener.close(); // endpoints already handed out stay open
   * ```
   */
  close(): void {
    this.listener.close();
    for (const waiter of this.#waiting.splice(0)) waiter({ value: undefined, done: true });
  }

  /** The same as `close()`, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }
}
