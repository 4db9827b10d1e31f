/**
 * A Node.js Duplex over an endpoint's UCP stream: writes are `streamSend`s (several in flight), reads
 * take the bytes the endpoint's stream receiver already holds (no copy beyond UCX's own), and `end()`
 * half-closes with an end-of-stream marker (src/endpoint/stream-end.ts).
 */
import { Duplex } from 'node:stream';
import { Endpoint } from './endpoint.js';
import { InvalidArgumentError } from './errors/misuse.js';
import type { Request } from './request.js';
import { ArgumentOutOfRangeError } from './errors/misuse.js';
import { optionsObject, show } from './internal/bytes.js';
import { kStreamReceiver } from './internal/symbols.js';
import { sendStreamEnd, watchStreamEnd } from './endpoint/stream-end.js';

/**
 * Options of `createEndpointDuplex()`.
 *
 * How the Duplex ends, as a `net.Socket` does: `end()` (once every write is sent) sends an
 * end-of-stream marker that carries how many bytes this Duplex wrote, and the peer's Duplex emits
 * `'end'` once it has read exactly that many, however the marker and the bytes raced. The other
 * direction stays open while `allowHalfOpen` is true; by default (false) a Duplex whose readable ended
 * ends its writable too. The marker is an active message on the AM id ucxx-ts reserves
 * (AM_ID_STREAM_END), so half-close needs the 'am' feature (in the default features); without it
 * `end()` closes the endpoint instead (`closeOnFinish` defaults to true). Either way the readable
 * also ends when the endpoint closes, after every byte the peer sent before its close, and an endpoint
 * that failed destroys the Duplex with its error.
 */
export interface EndpointDuplexOptions {
  /** Most bytes per chunk the readable side pushes (default 1 MiB). */
  readSize?: number;
  /**
   * Keep the writable side open after the readable side ended (the peer called `end()`), as
   * `net.Socket`'s option. Default false: this Duplex then ends its writable side by itself (the peer
   * gets its end-of-stream once our writes are sent), and is destroyed once both are done.
   */
  allowHalfOpen?: boolean;
  /**
   * Close the endpoint (gracefully: the peer still gets every byte written, and the end-of-stream
   * marker) when the writable side finishes, i.e. after `end()` once every write is sent. Default false
   * when the context has the 'am' feature (`end()` half-closes), true without it (closing is the only
   * end-of-stream a peer can see then; `false` makes `end()` send nothing).
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
 * How it ends (see EndpointDuplexOptions): `end()` half-closes as `net.Socket`'s does. Once every
 * write is sent it sends an end-of-stream marker, an active message on AM id AM_ID_STREAM_END (65535)
 * whose 8-byte header is the number of bytes this Duplex wrote (u64, little-endian), sent with
 * `reply: true`; the peer's Duplex emits `'end'` after reading exactly that many bytes, and with
 * `allowHalfOpen: false` (the default) it then ends its own writable side, so `pipeline(source, a)` on
 * one side and `pipeline(b, sink)` on the other both finish with the endpoint still open. The byte
 * counts are the Duplexes' own: stream bytes sent or read around them with `streamSend`/`streamRecv`
 * before the Duplexes must match on both sides, and after `end()` nothing more may be sent on the
 * endpoint's stream (as after a socket's FIN): the marker is not ordered with stream bytes, so the
 * peer's Duplex may read later bytes as part of this stream. One end-of-stream per direction. A peer that is no ucxx-ts (plain UCP) gets one active message on id 65535
 * it has no handler for: UCX drops it with a warning, and its stream is not affected. A context
 * without the 'am' feature has no half-close: `end()` closes the endpoint (`closeOnFinish`). The
 * readable side also ends when the endpoint closes, from either side (a graceful close delivers every
 * byte sent before it); an endpoint that failed destroys the Duplex with its error. Destroying the
 * Duplex leaves the endpoint open unless `closeEndpoint: true`.
 *
 * @example
 * ```ts
 * // the sender: the peer's pipeline finishes once this one has sent the whole file
 * await pipeline(fs.createReadStream('big.bin'), createEndpointDuplex(endpoint));
 * // the receiver (its writable side ends by itself once the file is in)
 * await pipeline(createEndpointDuplex(endpoint), fs.createWriteStream('copy.bin'));
 * ```
 */
export function createEndpointDuplex(endpoint: Endpoint, options: EndpointDuplexOptions = {}): Duplex {
  if (!(endpoint instanceof Endpoint)) throw new InvalidArgumentError('createEndpointDuplex: endpoint must be an Endpoint');
  options = optionsObject(options, 'createEndpointDuplex options');
  const readSize = options.readSize ?? 1024 * 1024;
  if (!Number.isSafeInteger(readSize) || readSize < 1) throw new ArgumentOutOfRangeError(`readSize must be >= 1, got ${show(readSize)}`);
  const halfClose = endpoint.worker.context.features.includes('am');
  const closeOnFinish = options.closeOnFinish ?? !halfClose;
  const receiver = endpoint[kStreamReceiver];
  let waiting: Request<Uint8Array> | null = null;
  /** Writes in flight, their bytes, and the callback of the one that waits for room. */
  const sends = new Set<Request<void>>();
  let sendingBytes = 0;
  let blocked: (() => void) | null = null;
  let whenSent: (() => void) | null = null;
  /** Bytes written (the marker's count) and read; the peer's count once its marker came. */
  let written = 0;
  let read = 0;
  let limit = Infinity;
  let readEnded = false;

  const endReadable = (): void => {
    if (readEnded) return;
    readEnded = true;
    stopWatching();
    duplex.push(null);
  };
  const closed = (): void => {
    const failure = endpoint.failure;
    if (failure !== undefined) duplex.destroy(failure);
    else endReadable();
  };
  /** Bytes the next chunk may take: not past the peer's end-of-stream, once its marker came. */
  const room = (): number => Math.min(readSize, limit - read);
  const push = (chunk: Uint8Array): boolean => {
    read += chunk.byteLength;
    return duplex.push(chunk);
  };
  const pull = (): void => {
    for (;;) {
      if (read >= limit) {
        endReadable();
        return;
      }
      const chunk = receiver.takeChunk(room());
      if (chunk === null) break;
      if (!push(chunk)) return;
    }
    if (receiver.ended) {
      closed();
      return;
    }
    const request = receiver.recvChunk(room(), undefined);
    waiting = request;
    request.promise.then(
      (chunk) => {
        if (waiting !== request) return;
        waiting = null;
        if (duplex.destroyed) return;
        if (chunk.byteLength === 0) return closed();
        if (push(chunk)) pull();
        else if (read >= limit) endReadable();
      },
      (err: Error) => {
        if (waiting !== request) return;
        waiting = null;
        if (!duplex.destroyed) duplex.destroy(err);
      },
    );
  };
  const stopWatching = halfClose
    ? watchStreamEnd(endpoint, (total) => {
      limit = total;
      // Fewer bytes read: the chunk waited for (or the next read) gets there.
      if (readEnded || duplex.destroyed || read < limit) return;
      const pending = waiting;
      // A chunk already served goes out first, then its callback ends the readable.
      if (pending !== null && pending.completed) return;
      waiting = null;
      pending?.cancel();
      endReadable();
    })
    : () => undefined;

  const finish = async (): Promise<void> => {
    if (halfClose && !endpoint.closed) {
      try {
        await sendStreamEnd(endpoint, written).promise;
      } catch (err) {
        // Every write was sent: a peer that closed or failed meanwhile needs no marker (and the readable
        // side reports a failure, if it still reads). An error here would come after 'end' unheard.
        if (!endpoint.closed) throw err;
      }
    }
    if (closeOnFinish) await endpoint.close();
  };

  const duplex = new Duplex({
    allowHalfOpen: options.allowHalfOpen ?? false,
    read() {
      if (waiting === null && !readEnded) pull();
    },
    write(chunk: Buffer, _encoding, callback) {
      let request: Request<void>;
      try {
        request = endpoint.streamSend(chunk);
      } catch (err) {
        callback(err as Error);
        return;
      }
      written += chunk.byteLength;
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
      const done = (): void => {
        whenSent = null;
        finish().then(() => callback(), (err: Error) => callback(err));
      };
      if (sends.size === 0) done();
      else whenSent = done;
    },
    destroy(err, callback) {
      stopWatching();
      const pending = waiting;
      waiting = null;
      pending?.cancel();
      if (options.closeEndpoint === true) endpoint.close().then(() => callback(err), () => callback(err));
      else callback(err);
    },
  });
  return duplex;
}
