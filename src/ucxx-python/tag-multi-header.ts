/**
 * ucxx C++'s `ucxx::Header` (cpp/include/ucxx/header.h, cpp/src/header.cpp), the framing of tagMulti
 * messages that ucxx Python's `send_multi`/`recv_multi` use. Pure functions, no FFI.
 *
 * A header describes up to 100 frames and is serialized field by field with no padding (1209 bytes):
 *
 *     offset 0     1 byte     next: 1 when another header follows, else 0 (a C++ bool)
 *     offset 1     8 bytes    nframes: the frames this header describes (<= 100)
 *     offset 9     100 x 4    isCUDA[i]: int, 1 for a CUDA frame, 0 for host
 *     offset 409   100 x 8    size[i]: size_t, the byte length of frame i
 *
 * in native byte order (little-endian on x86-64 and aarch64). Entries past nframes are zero. A sender
 * sends ceil(n / 100) headers, then the n frames, every message with the same tag.
 *
 * This is a private, minimal codec for the ucxx Python layer.
 */
import { MessageFormatError } from './errors.js';
import { ArgumentOutOfRangeError } from '../errors/misuse.js';
import { show } from '../internal/bytes.js';

/** The frames one header can describe (ucxx::HeaderFramesSize). */
export const HEADER_FRAMES = 100;
/** The serialized size of one header (ucxx::Header::dataSize()). */
export const HEADER_BYTES = 1 + 8 + HEADER_FRAMES * 4 + HEADER_FRAMES * 8;

const NFRAMES_AT = 1;
const IS_CUDA_AT = 9;
const SIZE_AT = IS_CUDA_AT + HEADER_FRAMES * 4;

export interface DecodedHeader {
  next: boolean;
  /** The frame sizes this header describes (nframes entries). */
  sizes: bigint[];
  /** isCUDA for each of those frames. */
  cuda: boolean[];
}

/**
 * The headers for frames of `sizes` bytes (all host memory), as `Header::buildHeaders` builds them.
 * No frames means no headers (ucxx sends nothing then).
 */
export function encodeHeaders(sizes: readonly number[]): Uint8Array[] {
  const headers: Uint8Array[] = [];
  for (let start = 0; start < sizes.length; start += HEADER_FRAMES) {
    const count = Math.min(HEADER_FRAMES, sizes.length - start);
    const bytes = new Uint8Array(HEADER_BYTES);
    const view = new DataView(bytes.buffer);
    view.setUint8(0, start + HEADER_FRAMES < sizes.length ? 1 : 0);
    view.setBigUint64(NFRAMES_AT, BigInt(count), true);
    for (let i = 0; i < count; i++) {
      const size = sizes[start + i] as number;
      if (!Number.isSafeInteger(size) || size < 0) throw new ArgumentOutOfRangeError(`frame size must be a byte count, got ${show(size)}`);
      view.setBigUint64(SIZE_AT + i * 8, BigInt(size), true);
    }
    headers.push(bytes);
  }
  return headers;
}

/**
 * Reads one header. MessageFormatError unless it is exactly HEADER_BYTES long, `next` is 0 or 1, and
 * nframes is at most 100 (ucxx checks only the last; it reads short headers as zero-padded).
 */
export function decodeHeader(bytes: Uint8Array): DecodedHeader {
  if (bytes.byteLength !== HEADER_BYTES) {
    throw new MessageFormatError(`a ucxx tagMulti header is ${HEADER_BYTES} bytes, got ${show(bytes.byteLength)}`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const next = view.getUint8(0);
  if (next > 1) throw new MessageFormatError(`ucxx tagMulti header: 'next' is ${next}, expected 0 or 1`);
  const nframes = view.getBigUint64(NFRAMES_AT, true);
  if (nframes > BigInt(HEADER_FRAMES)) {
    throw new MessageFormatError(`ucxx tagMulti header: nframes ${nframes} exceeds ${HEADER_FRAMES}`);
  }
  const sizes: bigint[] = [];
  const cuda: boolean[] = [];
  for (let i = 0; i < Number(nframes); i++) {
    sizes.push(view.getBigUint64(SIZE_AT + i * 8, true));
    cuda.push(view.getInt32(IS_CUDA_AT + i * 4, true) !== 0);
  }
  return { next: next === 1, sizes, cuda };
}
