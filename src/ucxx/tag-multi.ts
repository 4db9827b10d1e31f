/**
 * ucxx's tagMulti protocol: a list of buffers ("frames") sent as one unit over tag messages, so that
 * the receiver needs to know neither how many there are nor their sizes. Wire-compatible with ucxx's
 * `Endpoint::tagMultiSend` / `tagMultiRecv` (cpp/src/request_tag_multi.cpp):
 *
 * 1. the sender sends the headers (tag-multi-header.ts: 1209 bytes each, one per 100
 *    frames), then every frame in order, all as plain tag messages with the same tag;
 * 2. the receiver receives one header-sized message with its tag and mask, then another while the last
 *    one says `next`, then posts one receive per announced frame, with the same tag and mask.
 *
 * Tag messages from one sender with one tag are matched in order, so this works as long as nothing else
 * is sent with a matching tag meanwhile (as in ucxx). Receives started here for the same worker, tag and
 * mask run one after the other, so several may be started ahead without stealing each other's frames.
 */
import { kAborted, kBindSignal, kCancelFallback, kComplete, kFail, kLive, kOnSettle, kReply } from '../internal/symbols.js';
import { constants as bufferConstants } from 'node:buffer';
import { CanceledError, MessageTruncatedError } from '../errors/index.js';
import { Request, ResultKind, type AnyRequest, type TagRecvInfo } from '../request.js';
import { optionsObject, byteLengthOf, toTag, type BufferSource, show, FULL_MASK } from '../internal/bytes.js';
import {
  TAG_MULTI_HEADER_SIZE, decodeTagMultiHeader, encodeTagMultiHeaders,
} from './tag-multi-header.js';
import { UcxxCudaFrameError, UcxxHeaderFormatError } from '../errors/ucxx-header.js';
import type { Endpoint } from '../endpoint.js';
import type { ReceiveOptions, Worker } from '../worker.js';
import { InvalidArgumentError, ArgumentOutOfRangeError, INTERNAL } from '../errors/misuse.js';


/**
 * Options of `worker.tagMultiRecv()` and `endpoint.tagMultiRecv()`.
 *
 * @example
 * ```ts
 * const frames = await ep.tagMultiRecv(7n, undefined, { maxFrames: 16, maxBytes: 64 << 20, cudaFrames: 'host' });
 * ```
 */
export interface TagMultiRecvOptions extends ReceiveOptions {
  /**
   * Frames the sender marked as CUDA memory: 'error' (default, as ucxx built without CUDA) receives
   * them and then rejects with UcxxCudaFrameError; 'host' receives them into host memory (UCX copies
   * device memory across the wire like any other).
   */
  cudaFrames?: 'error' | 'host';
  /** The most frames accepted from one message; more is a UcxxHeaderFormatError. Default 1,000,000. */
  maxFrames?: number;
  /**
   * The most bytes (all frames together) accepted from one message, checked from the headers before
   * anything is allocated; more is a UcxxHeaderFormatError. Default 1 GiB.
   */
  maxBytes?: number;
}

/** Anything that posts a tag receive: a Worker, or an Endpoint (whose close cancels it). */
interface TagReceiver {
  tagRecv(buffer: BufferSource, tag: bigint, tagMask: bigint, options: ReceiveOptions): Request<TagRecvInfo>;
}

/** Completes when every part has; fails with the first failure once all have settled. */
function whenAll(parts: readonly AnyRequest[], what: string): Request<void> {
  const result = new Request<void>(INTERNAL, null, ResultKind.Void, what, parts);
  let pending = 0;
  let failure: Error | undefined;
  const finish = (): void => {
    if (failure === undefined) result[kComplete](0, 0, 0n);
    else result[kFail](failure);
  };
  const settled = (_status: number, _length: number, error: Error | undefined): void => {
    if (error !== undefined) failure ??= error;
    if (--pending === 0) finish();
  };
  for (const part of parts) {
    if (part.completed) {
      if (part.error !== undefined) failure ??= part.error;
    } else {
      pending++;
      part[kOnSettle] = settled;
    }
  }
  if (pending === 0) finish();
  else result[kCancelFallback] = () => { for (const part of parts) part.cancel(); };
  return result;
}

/** Sends `buffers` as one ucxx tagMulti message on `endpoint` (see Endpoint.tagMultiSend). */
export function tagMultiSend(endpoint: Endpoint, buffers: readonly BufferSource[], tag: bigint | number): Request<void> {
  endpoint[kLive]('tagMultiSend');
  if (!Array.isArray(buffers)) throw new InvalidArgumentError('tagMultiSend: buffers must be an array');
  const t = toTag(tag, 'tag');
  const sizes = buffers.map((buffer, i) => byteLengthOf(buffer, `tagMultiSend frame ${i}`));
  const headers = encodeTagMultiHeaders(sizes);
  const parts: AnyRequest[] = [];
  for (const header of headers) parts.push(endpoint.tagSend(header, t));
  for (const buffer of buffers) parts.push(endpoint.tagSend(buffer, t));
  return whenAll(parts, 'tagMultiSend');
}

/** Receives in flight per worker and tag/mask, so that they run one after the other. */
const queues = new WeakMap<Worker, Map<string, Promise<unknown>>>();

/**
 * Receives one ucxx tagMulti message (see Endpoint.tagMultiRecv), as a Request: `completed`, `status`
 * and `value` for a manual-progress loop, `cancel()` and the signal cancel the receives it is made of.
 */
export function tagMultiRecv(
  worker: Worker, receiver: TagReceiver, tag: bigint | number, tagMask: bigint | number = FULL_MASK,
  options: TagMultiRecvOptions = {},
): Request<Uint8Array[]> {
  options = optionsObject(options, 'tagMultiRecv options');
  const t = toTag(tag, 'tag');
  const m = toTag(tagMask, 'tagMask');
  const cudaFrames = options.cudaFrames ?? 'error';
  if (cudaFrames !== 'error' && cudaFrames !== 'host') {
    throw new InvalidArgumentError(`cudaFrames must be 'error' or 'host', got ${show(cudaFrames)}`);
  }
  const maxFrames = options.maxFrames ?? 1_000_000;
  if (!Number.isSafeInteger(maxFrames) || maxFrames < 1) throw new ArgumentOutOfRangeError(`maxFrames must be a positive integer, got ${show(maxFrames)}`);
  const maxBytes = options.maxBytes ?? 2 ** 30;
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new ArgumentOutOfRangeError(`maxBytes must be a non-negative integer, got ${show(maxBytes)}`);
  if (options.signal?.aborted === true) return worker[kAborted]('tagMultiRecv', options.signal);
  const result = new Request<Uint8Array[]>(INTERNAL, null, ResultKind.Value, 'tagMultiRecv', null);
  // cancel() and the caller's signal stop the receives through one signal of its own.
  const controller = new AbortController();
  result[kCancelFallback] = () => controller.abort(new CanceledError('tagMultiRecv: canceled'));
  result[kBindSignal](options.signal);
  const limits = { cudaFrames, maxFrames, maxBytes, signal: controller.signal } as const;

  let perWorker = queues.get(worker);
  if (perWorker === undefined) {
    perWorker = new Map();
    queues.set(worker, perWorker);
  }
  const key = `${t}/${m}`;
  const before = perWorker.get(key) ?? Promise.resolve();
  const run = before.then(() => receiveOne(receiver, t, m, limits), () => receiveOne(receiver, t, m, limits));
  const tail = run.then(() => undefined, () => undefined);
  perWorker.set(key, tail);
  void tail.then(() => {
    if (perWorker.get(key) === tail) perWorker.delete(key);
  });
  run.then((frames) => {
    result[kReply] = frames;
    result[kComplete](0, 0, 0n);
  }, (err: unknown) => {
    result[kFail](err instanceof Error ? err : new Error(String(err)));
  });
  return result;
}

interface Limits {
  readonly cudaFrames: 'error' | 'host';
  readonly maxFrames: number;
  readonly maxBytes: number;
  readonly signal: AbortSignal | undefined;
}

/** A tag receive whose truncation (the peer sent more than announced) is a format error. */
async function receive(receiver: TagReceiver, buffer: Uint8Array, tag: bigint, mask: bigint, signal: AbortSignal | undefined, what: string): Promise<number> {
  try {
    return (await receiver.tagRecv(buffer, tag, mask, { signal }).promise).length;
  } catch (err) {
    if (err instanceof MessageTruncatedError) {
      throw new UcxxHeaderFormatError('tag-multi', `${what}: the peer sent more than ${buffer.byteLength} bytes`, { cause: err });
    }
    throw err;
  }
}

async function receiveOne(receiver: TagReceiver, tag: bigint, mask: bigint, limits: Limits): Promise<Uint8Array[]> {
  const sizes: number[] = [];
  const cuda: number[] = [];
  let total = 0;
  for (let index = 0; ; index++) {
    const bytes = new Uint8Array(TAG_MULTI_HEADER_SIZE);
    const length = await receive(receiver, bytes, tag, mask, limits.signal, `header ${index}`);
    if (length !== TAG_MULTI_HEADER_SIZE) {
      throw new UcxxHeaderFormatError('tag-multi', `header ${index}: a ${length}-byte message, a header has ${TAG_MULTI_HEADER_SIZE}`);
    }
    const header = decodeTagMultiHeader(bytes);
    if (sizes.length + header.sizes.length > limits.maxFrames) {
      throw new UcxxHeaderFormatError('tag-multi', `more than maxFrames (${limits.maxFrames}) frames announced`);
    }
    for (let i = 0; i < header.sizes.length; i++) {
      const size = header.sizes[i] as number;
      if (size > bufferConstants.MAX_LENGTH) {
        throw new UcxxHeaderFormatError('tag-multi', `frame ${sizes.length} is announced as ${size} bytes, more than a buffer can hold`);
      }
      total += size;
      if (total > limits.maxBytes) {
        throw new UcxxHeaderFormatError('tag-multi', `the frames announced exceed maxBytes (${limits.maxBytes})`);
      }
      if (header.isCUDA[i] === true) cuda.push(sizes.length);
      sizes.push(size);
    }
    if (!header.next) break;
  }
  const frames = sizes.map((size) => new Uint8Array(size));
  const requests: Request<TagRecvInfo>[] = [];
  try {
    for (const frame of frames) requests.push(receiver.tagRecv(frame, tag, mask, { signal: limits.signal }));
  } catch (err) {
    for (const request of requests) request.cancel();
    throw err;
  }
  // The first failure cancels the other receives, and every one settles before this returns: none is
  // left posted to catch a later message.
  let failure: unknown;
  const outcomes = await Promise.allSettled(requests.map((request, i) => request.promise.catch((err: unknown) => {
    if (failure === undefined) {
      failure = err instanceof MessageTruncatedError
        ? new UcxxHeaderFormatError('tag-multi', `frame ${i}: the peer sent more than the ${sizes[i]} bytes announced`, { cause: err })
        : err;
      for (const other of requests) other.cancel();
    }
    throw err;
  })));
  for (let i = 0; i < outcomes.length && failure === undefined; i++) {
    const outcome = outcomes[i] as PromiseSettledResult<TagRecvInfo>;
    if (outcome.status === 'fulfilled' && outcome.value.length !== sizes[i]) {
      failure = new UcxxHeaderFormatError('tag-multi', `frame ${i}: ${outcome.value.length} bytes arrived, the header announced ${sizes[i]}`);
    }
  }
  if (failure !== undefined) throw failure;
  if (cuda.length > 0 && limits.cudaFrames === 'error') throw new UcxxCudaFrameError(cuda);
  return frames;
}

