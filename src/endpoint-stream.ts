/**
 * A Node.js Duplex stream over an endpoint's UCP stream: writes are `streamSend`, reads are
 * `streamRecv`. For code that speaks Node streams (pipeline, pipes, parsers).
 *
 * ```ts
 * const duplex = createEndpointDuplex(endpoint);
 * await pipeline(fs.createReadStream('big.bin'), duplex);
 * ```
 *
 * UCP streams have no end-of-stream marker: the readable side ends when the endpoint closes, and
 * ending the writable side sends nothing. Destroying the Duplex cancels its pending read (bytes UCX
 * already put there go to the next receive) and leaves the endpoint open unless `closeEndpoint`.
 */
import { Duplex } from 'node:stream';
import { Endpoint } from './endpoint.js';
import { InvalidArgumentError } from './internal/misuse-errors.js';
import type { Request } from './request.js';
import { ArgumentOutOfRangeError } from './internal/misuse-errors.js';
import { optionsObject, show } from './internal/bytes.js';

/** Options of `createEndpointDuplex()`. */
export interface EndpointDuplexOptions {
  /** Bytes asked for per read (default 64 KiB). */
  readSize?: number;
  /** Close the endpoint when the Duplex is destroyed. Default false. */
  closeEndpoint?: boolean;
}

/**
 * A Node.js Duplex over the endpoint's UCP stream (see the module comment).
 *
 * @example
 * ```ts
 * await pipeline(fs.createReadStream('big.bin'), createEndpointDuplex(endpoint));
 * ```
 */
export function createEndpointDuplex(endpoint: Endpoint, options: EndpointDuplexOptions = {}): Duplex {
  if (!(endpoint instanceof Endpoint)) throw new InvalidArgumentError('createEndpointDuplex: endpoint must be an Endpoint');
  options = optionsObject(options, 'createEndpointDuplex options');
  const readSize = options.readSize ?? 64 * 1024;
  if (!Number.isSafeInteger(readSize) || readSize < 1) throw new ArgumentOutOfRangeError(`readSize must be >= 1, got ${show(readSize)}`);
  let pending: Request<number> | null = null;
  const onClose = (): void => {
    duplex.push(null);
  };
  endpoint.once('close', onClose);
  const duplex = new Duplex({
    read() {
      if (pending !== null) return;
      if (endpoint.closed) {
        this.push(null);
        return;
      }
      const buffer = Buffer.allocUnsafe(readSize);
      pending = endpoint.streamRecv(buffer);
      pending.then(
        (length) => {
          pending = null;
          this.push(buffer.subarray(0, length));
        },
        (err: Error) => {
          pending = null;
          if (endpoint.closed || duplex.destroyed) this.push(null);
          else this.destroy(err);
        },
      );
    },
    write(chunk: Buffer, _encoding, callback) {
      let request;
      try {
        request = endpoint.streamSend(chunk);
      } catch (err) {
        callback(err as Error);
        return;
      }
      request.then(() => callback(), (err: Error) => callback(err));
    },
    destroy(err, callback) {
      endpoint.off('close', onClose);
      pending?.cancel();
      if (options.closeEndpoint === true) endpoint.close().then(() => callback(err), () => callback(err));
      else callback(err);
    },
  });
  return duplex;
}
