/**
 * Test peer for fence ordering: owns a UCX-allocated region (reached one-sided over shared memory),
 * sends its key as tag 1 to whoever connects, and on 'watch' spins synchronously, reading word B
 * (offset 64) and then word A (offset 0) as fast as it can. The initiator writes A = i, fences, then
 * B = i, for i = 1..rounds: seeing B ahead of A is a violation of the fence.
 */
import '../helpers/peer-errors.js';
import { Context } from 'ucxx-ts';

process.on('disconnect', () => process.exit(3));
const send = (message: object): void => {
  process.send?.(message);
};

const context = new Context();
const worker = context.createWorker();
const region = context.createMemoryHandle(4096);
const words = new Uint32Array(region.view().buffer, region.view().byteOffset, 1024);
words.fill(0);
const key = region.createRemoteKey().serialize();
const listener = worker.listen({ host: '127.0.0.1', port: 0 }, (endpoint) => {
  void endpoint.tagSend(key, 1n);
});

process.on('message', (message: { type: string; rounds?: number; limitMs?: number }) => {
  if (message.type === 'watch') {
    words.fill(0);
    send({ type: 'watching' });
    const rounds = message.rounds ?? 0;
    const end = Date.now() + (message.limitMs ?? 10_000);
    let samples = 0;
    let violations = 0;
    let changes = 0;
    let lastB = 0;
    let firstViolation: string | null = null;
    while (lastB < rounds) {
      const b = Atomics.load(words, 16);
      const a = Atomics.load(words, 0);
      samples++;
      if (b !== lastB) changes++;
      lastB = b;
      if (a < b) {
        violations++;
        firstViolation ??= `A=${a} B=${b}`;
      }
      if ((samples & 0xfff) === 0 && Date.now() > end) break;
    }
    send({ type: 'watched', samples, violations, changes, lastB, firstViolation });
  } else if (message.type === 'exit') {
    listener.close();
    void context.close().then(() => process.exit(0));
  }
});

send({ type: 'ready', port: listener.port });
