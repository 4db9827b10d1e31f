/**
 * Errors of ucxx's own wire protocols (tagMulti headers, active-message headers): bytes a peer sent
 * that are not what ucxx produces. Raised before anything is allocated from the values they carry.
 */
import { UCXX_TS_ERROR } from './brand.js';

/** Which ucxx header was malformed. */
export type UcxxHeaderKind = 'tag-multi' | 'am';

/**
 * A ucxx tagMulti header or AM header from a peer is malformed (length, flags, counts, sizes, padding).
 *
 * @example
 * ```ts
 * try {
 *   frames = await ep.tagMultiRecv(7n);
 * } catch (err) {
 *   if (err instanceof UcxxHeaderFormatError && err.header === 'tag-multi') await ep.close(); // not ucxx framing
 * }
 * ```
 */
export class UcxxHeaderFormatError extends Error {
  /** @internal Marks it as ucxx-ts's (errors/brand.ts). */
  readonly [UCXX_TS_ERROR] = true;
  /** Always 'UCXX_ERR_HEADER_FORMAT'. */
  readonly code = 'UCXX_ERR_HEADER_FORMAT' as const;
  /** Always 'UcxxHeaderFormatError'. */
  override name = 'UcxxHeaderFormatError';
  /** 'tag-multi' (the `ucxx::Header` of tagMulti) or 'am' (ucxx's active-message header). */
  readonly header: UcxxHeaderKind;

  constructor(header: UcxxHeaderKind, message: string, options?: ErrorOptions) {
    super(`ucxx ${header === 'am' ? 'AM' : 'tagMulti'} header: ${message}`, options);
    this.header = header;
  }
}

/**
 * A tagMulti message announced frames in CUDA memory (`isCUDA`), and the receive was not told to accept
 * them into host memory (`cudaFrames: 'host'`). The frames were received (and dropped) all the same, so
 * the next tagMulti message on that tag is read from its start.
 *
 * @example
 * ```ts
 * try {
 *   frames = await ep.tagMultiRecv(7n);
 * } catch (err) {
 *   if (!(err instanceof UcxxCudaFrameError)) throw err;
 *   console.warn(`frames ${err.frames.join(', ')} were CUDA memory`); // { cudaFrames: 'host' } accepts them
 * }
 * ```
 */
export class UcxxCudaFrameError extends Error {
  /** @internal Marks it as ucxx-ts's (errors/brand.ts). */
  readonly [UCXX_TS_ERROR] = true;
  /** Always 'UCXX_ERR_CUDA_FRAME'. */
  readonly code = 'UCXX_ERR_CUDA_FRAME' as const;
  /** Always 'UcxxCudaFrameError'. */
  override name = 'UcxxCudaFrameError';
  /** The indices of the frames the sender marked as CUDA memory. */
  readonly frames: readonly number[];

  constructor(frames: readonly number[]) {
    super(`tagMulti: the sender marked frame(s) ${frames.slice(0, 10).join(', ')}${frames.length > 10 ? ', ...' : ''} ` +
      "as CUDA memory; ucxx-ts has no CUDA memory (pass { cudaFrames: 'host' } to receive them into host memory)");
    this.frames = Object.freeze([...frames]);
  }
}
