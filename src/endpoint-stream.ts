/**
 * A Node.js Duplex over an endpoint's UCP stream: writes are `streamSend`s (several in flight), reads
 * take the bytes the endpoint's stream receiver already holds (no copy beyond UCX's own).
 */
import { Duplex } from 'node:stream';
import { Endpoint } from './endpoint.js';
import { InvalidArgumentError } from './internal/misuse-errors.js';
import type { Request } from './request.js';
import { ArgumentOutOfRangeError } from './internal/misuse-errors.js';
import { optionsObject, show } from './internal/bytes.js';
import { kStreamReceiver } from './internal/symbols.js';

/**
 * Options of `createEndpointDuplex()`.
 *
 * How the Duplex ends: UCP streams carry no end-of-stream marker, so the readable side ends (`'end'`)
 * when the endpoint closes, from either side, after every byte the peer sent before its close has been
 * read. `end()` of the writable side sends nothing by itself: with `closeOnFinish` it closes the
 * endpoint once every write is sent, which ends the peer's readable (and this Duplex's readable too:
 * there is no half-close).
 */
export interface EndpointDuplexOptions {
  /** Most bytes per chunk the readable side pushes (default 1 MiB). */
  readSize?: number;
  /**
   * Close the endpoint (gracefully: the peer still gets every byte written) when the writable side
   * finishes, i.e. after `end()` once every write is sent. Default false. This is how a `pipeline`
   * into the Duplex makes the peer's `pipeline` out of its Duplex finish.
   */
  closeOnFinish?: boolean;
  /** Close the endpoint when the Duplex is destroyed (by `destroy()`, an error, or both sides ending). Default false. */
  closeEndpoint?: boolean;
}

/** Bytes of writes in flight before a write's callback waits for an earlier one to complete. */
const WRITE_WINDOW = 8 * 1024 * 1024;

/**
 * A Node.js Duplex over the endpoint's UCP stream, for code that speaks Node streams (`pipeline`,
 * pipes, parsers). Writes are `streamSend`s, up to 8 MiB of them in flight; reads hand out the bytes
 * as they arrived (Buffers, never copied again).
 *
 * How it ends (see EndpointDuplexOptions): the readable side emits `'end'` once the endpoint is closed
 * (by either side: a graceful close delivers every byte sent before it) and every byte has been read;
 * an endpoint that failed destroys the Duplex with its error instead. `end()` sends no end-of-stream
 * marker (UCP streams have none, and there is no half-close): pass `closeOnFinish: true` to close the
 * endpoint once every write is sent, which ends the peer's readable. Destroying the Duplex leaves the
 * endpoint open unless `closeEndpoint: true`.
 *
 * @example
 * ```ts
 * // the sender: the peer's pipeline finishes once this one has sent the whole file
 * await pipeline(fs.createReadStream('big.bin'), createEndpointDuplex(endpoint, { closeOnFinish: true }));
 * // the receiver
 * await pipeline(createEndpointDuplex(endpoint), fs.createWriteStream('copy.bin'));
 * ```
 */
export function createEndpointDuplex(endpoint: Endpoint, options: EndpointDuplexOptions = {}): Duplex {
  if (!(endpoint instanceof Endpoint)) throw new InvalidArgumentError('createEndpointDuplex: endpoint must be an Endpoint');
  options = optionsObject(options, 'createEndpointDuplex options');
  const readSize = options.readSize ?? 1024 * 1024;
  if (!Number.isSafeInteger(readSize) || readSize < 1) throw new ArgumentOutOfRangeError(`readSize must be >= 1, got ${show(readSize)}`);
  const receiver = endpoint[kStreamReceiver];
  let waiting: Request<Uint8Array> | null = null;
  /** Writes in flight, their bytes, and the callback of the one that waits for room. */
  const sends = new Set<Request<void>>();
  let sendingBytes = 0;
  let blocked: (() => void) | null = null;
  let whenSent: (() => void) | null = null;

  const end = (): void => {
    const failure = endpoint.failure;
    if (failure !== undefined) duplex.destroy(failure);
    else duplex.push(null);
  };
  const pull = (): void => {
    for (;;) {
      const chunk = receiver.takeChunk(readSize);
      if (chunk === null) break;
      if (!duplex.push(chunk)) return;
    }
    if (receiver.ended) {
      end();
      return;
    }
    const request = receiver.recvChunk(readSize, undefined);
    waiting = request;
    request.promise.then(
      (chunk) => {
        waiting = null;
        if (duplex.destroyed) return;
        if (chunk.byteLength === 0) end();
        else if (duplex.push(chunk)) pull();
      },
      (err: Error) => {
        waiting = null;
        if (!duplex.destroyed) duplex.destroy(err);
      },
    );
  };

  const duplex = new Duplex({
    read() {
      if (waiting === null) pull();
    },
    write(chunk: Buffer, _encoding, callback) {
      let request: Request<void>;
      try {
        request = endpoint.streamSend(chunk);
      } catch (err) {
        callback(err as Error);
        return;
      }
      if (request.completed) {
        callback(request.error);
        return;
      }
      // Several writes in flight keep UCX's pipeline full; the callback waits only when the window is.
      sends.add(request);
      sendingBytes += chunk.byteLength;
      request.promise.then(
        () => {
          sends.delete(request);
          sendingBytes -= chunk.byteLength;
          const next = blocked;
          if (next !== null && sendingBytes < WRITE_WINDOW) {
            blocked = null;
            next();
          }
          if (sends.size === 0) whenSent?.();
        },
        (err: Error) => {
          sends.delete(request);
          sendingBytes -= chunk.byteLength;
          duplex.destroy(err);
        },
      );
      if (sendingBytes < WRITE_WINDOW) callback();
      else blocked = () => callback();
    },
    final(callback) {
      const finish = (): void => {
        whenSent = null;
        if (options.closeOnFinish === true) endpoint.close().then(() => callback(), (err: Error) => callback(err));
        else callback();
      };
      if (sends.size === 0) finish();
      else whenSent = finish;
    },
    destroy(err, callback) {
      waiting?.cancel();
      if (options.closeEndpoint === true) endpoint.close().then(() => callback(err), () => callback(err));
      else callback(err);
    },
  });
  return duplex;
}
