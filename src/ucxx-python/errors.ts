/**
 * The errors of the ucxx Python protocol layer. They live here, free of any FFI import, so the pure codecs
 * can throw them; src/errors/index.ts re-exports them.
 */
import { UCXX_TS_ERROR } from '../errors/brand.js';

/** Why a ucxx Python handshake failed. */
export type HandshakeFailure =
  /** The peer's checksum is not hash64bits of its tag. */
  | 'checksum'
  /** The peer sent part of its 16-byte peer information, then stopped (timed out) or went away. */
  | 'truncated'
  /** Nothing arrived from the peer (or our own send did not complete) within the connect timeout. */
  | 'timeout'
  /** The endpoint failed or was closed during the exchange (the cause is the UcxError or ClosedError). */
  | 'failed';

/**
 * The peer-information exchange that ucxx Python runs on every new endpoint did not complete: the peer
 * sent a bad checksum, too few bytes, nothing in time, or the connection failed. The endpoint has been
 * closed by the time this is thrown.
 *
 * @example
 * ```ts
 * try {
 *   ep = await worker.connect(host, port, { handshake: 'ucxx-python', connectTimeout: 2000 });
 * } catch (err) {
 *   if (err instanceof HandshakeError) console.error(`no ucxx Python handshake: ${err.reason}`); // e.g. 'timeout'
 * }
 * ```
 */
export class HandshakeError extends Error {
  /** @internal Marks it as ucxx-ts's (errors/brand.ts). */
  readonly [UCXX_TS_ERROR] = true;
  /** Always 'HandshakeError'. */
  override readonly name = 'HandshakeError';
  /** Always 'UCXX_ERR_HANDSHAKE'. */
  readonly code = 'UCXX_ERR_HANDSHAKE' as const;
  /** What went wrong: 'checksum', 'truncated', 'timeout' or 'failed'. */
  readonly reason: HandshakeFailure;
  /** How many bytes of the peer's 16-byte peer information had arrived. */
  readonly received: number;

  constructor(reason: HandshakeFailure, message: string, received: number, options?: ErrorOptions) {
    super(message, options);
    this.reason = reason;
    this.received = received;
  }
}

/**
 * A message from a ucxx Python peer that does not have the format its protocol defines: a tag-multi
 * header that is not 1209 bytes or names more than 100 frames, a frame whose length differs from its
 * header entry, or a size (send_obj's 8-byte prefix, a header's frame sizes) above the receiver's limit.
 * The endpoint's message sequence is no longer in step after it: close the endpoint.
 *
 * @example
 * ```ts
 * try {
 *   obj = await ep.recvObj({ maxBytes: 1 << 20 });
 * } catch (err) {
 *   if (err instanceof MessageFormatError) await ep.close(); // out of step with the peer from here on
 * }
 * ```
 */
export class MessageFormatError extends Error {
  /** @internal Marks it as ucxx-ts's (errors/brand.ts). */
  readonly [UCXX_TS_ERROR] = true;
  /** Always 'MessageFormatError'. */
  override readonly name = 'MessageFormatError';
  /** Always 'UCXX_ERR_MESSAGE_FORMAT'. */
  readonly code = 'UCXX_ERR_MESSAGE_FORMAT' as const;

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}
