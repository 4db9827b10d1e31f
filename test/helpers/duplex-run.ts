/**
 * Both ends of a Duplex conversation, as a program writes it: `pipeline(source, duplex)` writes
 * pattern bytes in 1 MiB writes, `pipeline(duplex, checker)` reads and checks every byte against the
 * pattern the peer writes. Used by the test and by its peer process (test/peers/duplex-peer.ts).
 */
import { Readable, Writable, type Duplex } from 'node:stream';
import type { Feature } from 'ucxx-ts';
import { pipeline } from 'node:stream/promises';
import { pattern } from './pattern.js';
import { sleep } from './deadline.js';

const MiB = 1 << 20;

/** What the peer process (test/peers/duplex-peer.ts) writes and expects: its command-line config. */
export interface DuplexPeerPlan {
  /** Bytes it writes, from pattern `seed`. */
  size: number;
  seed: number;
  /** Bytes it expects to read, from pattern `expectSeed`. */
  expectSize: number;
  expectSeed: number;
  allowHalfOpen?: boolean;
  features?: Feature[];
}

/** What one side saw. */
export interface ReadReport {
  /** Bytes read before 'end'. */
  length: number;
  /** The first byte that differs from the pattern, -1 when none (more bytes than expected count as one). */
  mismatch: number;
}

/** A Readable of `length` pattern(seed) bytes in `writeSize` pieces (none when `length` is 0). */
export function patternSource(seed: number, length: number, writeSize = MiB): Readable {
  const data = pattern(seed, length);
  const pieces = function* (): Generator<Uint8Array> {
    for (let offset = 0; offset < length; offset += writeSize) yield data.subarray(offset, offset + writeSize);
  };
  return Readable.from(pieces(), { objectMode: false });
}

/** Writes `length` bytes of pattern(seed) into the Duplex and ends it (pipeline's end). */
export async function writeAll(duplex: Duplex, seed: number, length: number): Promise<void> {
  await pipeline(patternSource(seed, length), duplex);
}

/**
 * Reads the Duplex until 'end' (pipeline's), checking each byte against pattern(seed, expected);
 * `delayMs` between chunks makes a slow consumer.
 */
export async function readAll(duplex: Duplex, seed: number, expected: number, delayMs = 0): Promise<ReadReport> {
  const want = pattern(seed, expected);
  const report: ReadReport = { length: 0, mismatch: -1 };
  await pipeline(duplex, new Writable({
    write(chunk: Buffer, _encoding, callback) {
      const at = report.length;
      report.length += chunk.byteLength;
      if (report.mismatch < 0) {
        if (report.length > expected) report.mismatch = Math.max(at, expected);
        else if (!chunk.equals(want.subarray(at, report.length))) {
          let i = 0;
          while (chunk[i] === want[at + i]) i++;
          report.mismatch = at + i;
        }
      }
      if (delayMs > 0) sleep(delayMs).then(() => callback(), callback);
      else callback();
    },
  }));
  return report;
}
