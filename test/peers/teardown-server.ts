/**
 * Test peer: a server that clients send to and leave (test/teardown.test.ts). It reports each accepted
 * endpoint's close, and on command does what a user's program does afterwards: receives what the
 * gone clients left behind (tag receives, rendezvous active messages held by a handler), then closes
 * its context. A UCX abort here shows up as the peer's exit status (134), never in the test process.
 *
 * Config: { mode: 'am' | 'tag' }. Messages from the test: 'recv' { count, size } (tag: that many
 * tagRecv; am: receive() on that many held messages), 'send' { count, size } (that many tag sends to
 * every open endpoint, not awaited; replies 'posted' { to: how many endpoints }), 'diag' (getDiagnostics' requestsInFlight and endpoints), 'close'
 * (context.close(), then exit 0).
 */
import '../helpers/peer-errors.js';
import { Context, getDiagnostics, type AmMessage, type Endpoint } from 'ucxx-ts';

const args = JSON.parse(process.argv[2] ?? '{}') as { mode: 'am' | 'tag' };
const send = (message: Record<string, unknown>): void => {
  process.send?.(message);
};
const context = new Context();
const worker = context.createWorker();
const held: AmMessage[] = [];
let closedEndpoints = 0;
if (args.mode === 'am') {
  // Keeps every message and never receives it: as a handler that defers (or forgets) the payload.
  worker.setAmHandler(7, (msg) => {
    held.push(msg);
    send({ type: 'am', rendezvous: msg.rendezvous, length: msg.length, held: held.length });
  });
}
const endpoints: Endpoint[] = [];
const listener = worker.listen({ host: '127.0.0.1', port: 0 }, (ep) => {
  endpoints.push(ep);
  ep.on('close', () => send({ type: 'ep-closed', closed: ++closedEndpoints }));
  ep.on('error', () => {});
});

/** The outcome of one receive: the bytes' check, or the error's class and code. */
function outcome(err: unknown): { ok: false; name: string; code: string } {
  const e = err as { name?: string; code?: string };
  return { ok: false, name: String(e.name), code: String(e.code) };
}

process.on('message', (message: { type: string; count?: number; size?: number }) => {
  void (async () => {
    if (message.type === 'recv') {
      const results: unknown[] = [];
      const size = message.size ?? 0;
      for (let i = 0; i < (message.count ?? 0); i++) {
        const buffer = new Uint8Array(size);
        try {
          if (args.mode === 'tag') {
            const { length } = await worker.tagRecv(buffer, 0n, 0n, { signal: AbortSignal.timeout(10_000) });
            results.push({ ok: true, length, intact: intact(buffer.subarray(0, length)) });
          } else {
            const msg = held.shift();
            if (msg === undefined) break;
            const data = await msg.receive(buffer);
            results.push({ ok: true, length: data.byteLength, intact: intact(data) });
          }
        } catch (err) {
          results.push(outcome(err));
        }
      }
      send({ type: 'received', results });
    } else if (message.type === 'send') {
      // Replies nobody receives yet: `count` tag sends of `size` bytes to every open endpoint.
      let to = 0;
      for (const ep of endpoints) {
        if (ep.closed) continue;
        to++;
        for (let i = 0; i < (message.count ?? 0); i++) ep.tagSend(new Uint8Array(message.size ?? 0), 1000n + BigInt(i)).catch(() => {});
      }
      send({ type: 'posted', to });
    } else if (message.type === 'diag') {
      const { requestsInFlight, endpoints: live } = getDiagnostics();
      send({ type: 'diag', requestsInFlight, endpoints: live });
    } else if (message.type === 'close') {
      await context.close();
      send({ type: 'closed' });
      process.exit(0);
    } else if (message.type === 'exit') {
      process.exit(0);
    }
  })();
});

/** The client fills each message with (index + 7 * i) & 0xff from its first byte's index. */
function intact(data: Uint8Array): boolean {
  if (data.byteLength === 0) return true;
  const first = data[0] as number;
  for (let i = 0; i < data.byteLength; i += 4093) {
    if (data[i] !== ((first + 7 * i) & 0xff)) return false;
  }
  return true;
}

send({ type: 'ready', port: listener.port });
