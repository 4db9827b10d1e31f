import { UCXX_TS_ERROR } from './brand.js';

/**
 * Thrown when a serialized remote key (the ucxx wire format) or the packed UCP remote key inside it
 * is malformed: wrong length, checksum mismatch, fields out of range, or a packed key whose structure
 * is not what `ucp_rkey_pack` produces. Such a key is never handed to `ucp_ep_rkey_unpack`, which
 * trusts its input completely.
 *
 * @example
 * ```ts
 * try {
 *   key = createRemoteKeyFromSerialized(ep, bytesFromPeer);
 * } catch (err) {
 *   if (err instanceof RemoteKeyFormatError) await ep.close(); // corrupt or not a key: UCX never saw it
 * }
 * ```
 */
export class RemoteKeyFormatError extends Error {
  /** @internal Marks it as ucxx-ts's (errors/brand.ts). */
  readonly [UCXX_TS_ERROR] = true;
  /** Always 'UCXX_ERR_REMOTE_KEY_FORMAT'. */
  readonly code = 'UCXX_ERR_REMOTE_KEY_FORMAT' as const;
  /** Always 'RemoteKeyFormatError'. */
  override name = 'RemoteKeyFormatError';

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}
