/**
 * An all-to-all exchange between participants (the main thread and `worker_threads` threads, each with its
 * own Context): every participant tag-sends a pattern to every other one and checks what it receives,
 * memPuts its pattern into its slot of every other participant's region and memGets it back; after a
 * barrier, every participant checks that its own region holds every writer's bytes.
 */
import { createRemoteKeyFromSerialized, type MemoryHandle, type Worker } from 'ucxx-ts';

export interface ExchangeInfo {
  id: number;
  address: Uint8Array;
  key: Uint8Array;
}
export type Roster = ExchangeInfo[];

export const SLOT = 4096;
export const MESSAGE = 32 * 1024;

/** The bytes `from` sends/writes for `to` (distinct for every ordered pair). */
export function pattern(from: number, to: number, length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) bytes[i] = (from * 37 + to * 101 + i * 7 + (i >> 8)) & 0xff;
  return bytes;
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

export interface ExchangeReport {
  id: number;
  /** Peers whose tag message arrived byte-exact. */
  tagOk: number[];
  /** Peers whose region took our put and gave it back by get byte-exact. */
  rmaOk: number[];
  /** Writers whose bytes our own region holds byte-exact after the barrier. */
  regionOk: number[];
}

export async function participant(
  id: number, worker: Worker, region: MemoryHandle, roster: Roster, barrier: () => Promise<void>,
): Promise<ExchangeReport> {
  const peers = roster.filter((p) => p.id !== id);
  const report: ExchangeReport = { id, tagOk: [], rmaOk: [], regionOk: [] };
  const endpoints = new Map(peers.map((p) => [p.id, worker.connectToAddress(p.address)]));
  // Receives first (tag = the sender's id), then sends.
  const receives = peers.map(async (p) => {
    const buffer = new Uint8Array(MESSAGE);
    const info = await worker.tagRecv(buffer, BigInt(p.id));
    if (info.length === MESSAGE && equal(buffer, pattern(p.id, id, MESSAGE))) report.tagOk.push(p.id);
  });
  await Promise.all(peers.map((p) => endpoints.get(p.id)?.tagSend(pattern(id, p.id, MESSAGE), BigInt(id))));
  await Promise.all(receives);
  for (const p of peers) {
    const endpoint = endpoints.get(p.id);
    if (endpoint === undefined) continue;
    const key = createRemoteKeyFromSerialized(endpoint, p.key);
    const mine = pattern(id, p.id, SLOT);
    await endpoint.memPut(mine, key, id * SLOT);
    await endpoint.flush();
    const back = new Uint8Array(SLOT);
    await endpoint.memGet(back, key, id * SLOT);
    await endpoint.flush();
    if (equal(back, mine)) report.rmaOk.push(p.id);
  }
  await barrier();
  const view = region.view();
  for (const p of peers) {
    if (equal(view.subarray(p.id * SLOT, (p.id + 1) * SLOT), pattern(p.id, id, SLOT))) report.regionOk.push(p.id);
  }
  return report;
}
