/**
 * ucxx's tagMulti header (`ucxx::Header`, cpp/include/ucxx/header.h and cpp/src/header.cpp): a fixed
 * 1209-byte record describing up to 100 frames, written field by field with no padding, native byte
 * order (little-endian on every platform ucxx runs on):
 *
 * | offset | width   | field                                                  |
 * |--------|---------|--------------------------------------------------------|
 * | 0      | 1       | `next`: 1 when another header follows, else 0          |
 * | 1      | 8       | `nframes`: frames described here (u64, at most 100)    |
 * | 9      | 100 x 4 | `isCUDA[i]`: i32, 1 = CUDA memory, 0 = host            |
 * | 409    | 100 x 8 | `size[i]`: u64 byte length of frame i                  |
 *
 * Slots at and after `nframes` are zero. More than 100 frames take several headers: every one but the
 * last has `next = 1` and exactly 100 frames. Pure code, no FFI.
 */
import { UcxxHeaderFormatError } from '../errors/ucxx-header.js';
import { InvalidArgumentError, ArgumentOutOfRangeError } from '../errors/misuse.js';
import { show } from '../internal/bytes.js';

/**
 * Frames one header describes at most (ucxx's `HeaderFramesSize`).
 *
 * @example
 * ```ts
 * const frames = [meta, ...chunks];
 * const headers = Math.ceil(frames.length / TAG_MULTI_HEADER_FRAMES); // what tagMultiSend sends first
 * await ep.tagMultiSend(frames, 7n);
 * ```
 */
export const TAG_MULTI_HEADER_FRAMES = 100;
const OFFSET_NFRAMES = 1;
const OFFSET_IS_CUDA = 9;
const OFFSET_SIZE = OFFSET_IS_CUDA + 4 * TAG_MULTI_HEADER_FRAMES;
/**
 * The serialized size of one header (ucxx's `Header::dataSize()`): 1 + 8 + 400 + 800.
 *
 * @example
 * ```ts
 * const header = new Uint8Array(TAG_MULTI_HEADER_SIZE); // 1209 bytes
 * const { length } = await worker.tagRecv(header, 7n);
 * const { next, sizes } = decodeTagMultiHeader(header.subarray(0, length));
 * ```
 */
export const TAG_MULTI_HEADER_SIZE = OFFSET_SIZE + 8 * TAG_MULTI_HEADER_FRAMES;

/** One decoded header. */
export interface TagMultiHeader {
  /** Another header follows this one. */
  readonly next: boolean;
  /** The byte length of each frame described here (1 to 100 of them). */
  readonly sizes: readonly number[];
  /** Whether the sender marked each frame as CUDA memory. */
  readonly isCUDA: readonly boolean[];
}

function fail(message: string): never {
  throw new UcxxHeaderFormatError('tag-multi', message);
}

/**
 * The headers announcing frames of these sizes, in sending order, as ucxx's `Header::buildHeaders`
 * makes them. At least one frame: ucxx has no representation for zero (it would send nothing).
 *
 * @example
 * ```ts
 * const headers = encodeTagMultiHeaders([meta.byteLength, body.byteLength]); // one header: <= 100 frames
 * for (const buffer of [...headers, meta, body]) await ep.tagSend(buffer, 7n); // what tagMultiSend does
 * ```
 */
export function encodeTagMultiHeaders(sizes: readonly number[], isCUDA?: readonly boolean[]): Uint8Array[] {
  if (!Array.isArray(sizes)) throw new InvalidArgumentError('tagMulti frame sizes must be an array');
  if (sizes.length === 0) {
    throw new ArgumentOutOfRangeError('tagMulti needs at least one frame: ucxx\'s protocol has no way to send zero ' +
      '(ucxx sends no header and its request never completes)');
  }
  if (isCUDA !== undefined && !Array.isArray(isCUDA)) throw new InvalidArgumentError('tagMulti isCUDA flags must be an array');
  if (isCUDA !== undefined && isCUDA.length !== sizes.length) {
    throw new ArgumentOutOfRangeError(`tagMulti: ${sizes.length} sizes but ${isCUDA.length} isCUDA flags`);
  }
  const headers: Uint8Array[] = [];
  for (let first = 0; first < sizes.length; first += TAG_MULTI_HEADER_FRAMES) {
    const count = Math.min(TAG_MULTI_HEADER_FRAMES, sizes.length - first);
    const bytes = new Uint8Array(TAG_MULTI_HEADER_SIZE);
    const view = new DataView(bytes.buffer);
    bytes[0] = first + count < sizes.length ? 1 : 0;
    view.setBigUint64(OFFSET_NFRAMES, BigInt(count), true);
    for (let i = 0; i < count; i++) {
      const size = sizes[first + i];
      if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) {
        throw new ArgumentOutOfRangeError(`tagMulti frame ${first + i}: size must be a non-negative safe integer, got ${show(size)}`);
      }
      view.setInt32(OFFSET_IS_CUDA + 4 * i, isCUDA?.[first + i] === true ? 1 : 0, true);
      view.setBigUint64(OFFSET_SIZE + 8 * i, BigInt(size), true);
    }
    headers.push(bytes);
  }
  return headers;
}

/**
 * Decodes and validates one header: exactly TAG_MULTI_HEADER_SIZE bytes, `next` 0 or 1, 1 to 100
 * frames (exactly 100 when `next`), `isCUDA` 0 or 1, sizes below 2^53, unused slots zero. Anything else
 * is a UcxxHeaderFormatError.
 *
 * @example
 * ```ts
 * const [header] = encodeTagMultiHeaders([5, 1024], [false, true]);
 * const { next, sizes, isCUDA } = decodeTagMultiHeader(header!); // false, [5, 1024], [false, true]
 * ```
 */
export function decodeTagMultiHeader(bytes: Uint8Array): TagMultiHeader {
  if (!(bytes instanceof Uint8Array)) throw new InvalidArgumentError('a tagMulti header must be a Uint8Array');
  if (bytes.byteLength !== TAG_MULTI_HEADER_SIZE) {
    fail(`${bytes.byteLength} bytes, a header has exactly ${TAG_MULTI_HEADER_SIZE}`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const nextByte = view.getUint8(0);
  if (nextByte > 1) fail(`the 'next' flag is ${nextByte}, not 0 or 1`);
  const next = nextByte === 1;
  const nframes64 = view.getBigUint64(OFFSET_NFRAMES, true);
  if (nframes64 > BigInt(TAG_MULTI_HEADER_FRAMES)) {
    fail(`nframes is ${nframes64}, a header holds at most ${TAG_MULTI_HEADER_FRAMES}`);
  }
  const nframes = Number(nframes64);
  if (nframes === 0) fail('nframes is 0 (ucxx never sends a header without frames)');
  if (next && nframes !== TAG_MULTI_HEADER_FRAMES) {
    fail(`'next' is set but nframes is ${nframes} (a header followed by another is full: ${TAG_MULTI_HEADER_FRAMES})`);
  }
  const sizes: number[] = [];
  const isCUDA: boolean[] = [];
  for (let i = 0; i < TAG_MULTI_HEADER_FRAMES; i++) {
    const cuda = view.getInt32(OFFSET_IS_CUDA + 4 * i, true);
    const size = view.getBigUint64(OFFSET_SIZE + 8 * i, true);
    if (i < nframes) {
      if (cuda !== 0 && cuda !== 1) fail(`isCUDA[${i}] is ${cuda}, not 0 or 1`);
      if (size > BigInt(Number.MAX_SAFE_INTEGER)) fail(`size[${i}] is ${size} bytes`);
      isCUDA.push(cuda === 1);
      sizes.push(Number(size));
    } else if (cuda !== 0 || size !== 0n) {
      fail(`slot ${i} is past nframes (${nframes}) but not zero (isCUDA ${cuda}, size ${size})`);
    }
  }
  return { next, sizes, isCUDA };
}
