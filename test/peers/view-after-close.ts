/**
 * Test peer (run with --expose-gc): a view of UCX-allocated memory stays safe to touch after its handle
 * and its context are closed, and the mapping is released once the view is collected.
 */
import { Context } from 'ucxx-ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');
const context = new Context();
const region = context.createMemoryHandle(8 << 20);
let view: Uint8Array | undefined = region.view();
view.fill(7);
region.close();
await context.close();
// The handle and the context are closed: the view must still be backed by mapped memory.
view[123] = 9;
let sum = 0;
for (let i = 0; i < view.length; i += 4096) sum += view[i] as number;
gc();
view.fill(1);
view = undefined;
for (let i = 0; i < 5; i++) {
  gc();
  await new Promise((resolve) => setTimeout(resolve, 10));
}
console.log(`view-after-close: ok ${sum}`);
