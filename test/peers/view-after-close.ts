/**
 * Test peer (run with --expose-gc): a view of UCX-allocated memory stays safe to touch after its handle
 * and its context are closed, and the mapping is released once the view is collected (read from
 * /proc/self/maps: the region's address range is mapped after close and gone after GC).
 */
import { readFileSync } from 'node:fs';
import { Context } from 'ucxx-ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');
const keep = process.argv[2] === 'keep';
/** The mappings of /proc/self/maps that start at `base`. */
const mappingsAt = (base: bigint): string[] =>
  readFileSync('/proc/self/maps', 'utf8').split('\n').filter((line) => line.startsWith(`${base.toString(16)}-`));

const context = new Context();
const region = context.createMemoryHandle(8 << 20);
const base = region.getBaseAddress();
let view: Uint8Array | undefined = region.view();
view.fill(7);
const mappedBefore = mappingsAt(base).length;
region.close();
await context.close();
// The handle and the context are closed: the view must still be backed by mapped memory.
view[123] = 9;
let sum = 0;
for (let i = 0; i < view.length; i += 4096) sum += view[i] as number;
const mappedAfterClose = mappingsAt(base).length;
gc();
view.fill(1);
const kept = keep ? view : undefined;
view = undefined;
for (let i = 0; i < 5; i++) {
  gc();
  await new Promise((resolve) => setTimeout(resolve, 10));
}
const mappedAfterGc = mappingsAt(base).length;
console.log(`view-after-close: ok ${sum} mapped: before close ${mappedBefore}, after close ${mappedAfterClose}, ` +
  `after gc ${mappedAfterGc}${keep ? ` (kept ${String(kept?.length)})` : ''}`);
