/**
 * Test peer for test/lifetime-node.test.ts: a server as a user writes one. It listens; sends each
 * connecting endpoint its region's serialized key (tag 1); answers active message 1 with active
 * message 2 (the same header and data) after `replyDelayMs`; and serves tag RPCs on every endpoint
 * until the client leaves: the connection's id on tag 2, then each request on tag (10 << 32) | id
 * and the same bytes back on tag 11. IPC 'stats' reports,
 * over all endpoints, how many emitted 'error' and 'close', and how many replies were rejected.
 */
import '../helpers/peer-errors.js';
import { Context, type Endpoint } from 'ucxx-ts';

interface Config {
  replyDelayMs?: number;
}

const config = JSON.parse(process.argv[2] ?? '{}') as Config;
process.on('disconnect', () => process.exit(3));
const send = (message: object): void => {
  process.send?.(message);
};

const context = new Context();
const worker = context.createWorker();
const region = context.createMemoryHandle(1 << 16);
region.view().fill(7);
const key = region.createRemoteKey().serialize();

const stats = { connected: 0, errors: 0, closes: 0, closedByPeer: 0, rpcs: 0, rejectedReplies: 0, errorCodes: [] as string[] };

/** RPC requests come on tag (10 << 32) | the connection's id, which each connection gets on tag 2. */
const rpcTag = (id: number): bigint => (10n << 32n) | BigInt(id);
let connections = 0;

async function serveRpc(ep: Endpoint, id: number): Promise<void> {
  const buffer = new Uint8Array(64);
  for (;;) {
    let length: number;
    try {
      // Tags match per worker: the connection's own tag keeps the clients' requests apart.
      ({ length } = await ep.tagRecv(buffer, rpcTag(id)));
    } catch {
      return; // the client left: the receive is cancelled with the endpoint
    }
    try {
      await ep.tagSend(buffer.slice(0, length), 11n);
      stats.rpcs++;
    } catch (err) {
      stats.rejectedReplies++;
      stats.errorCodes.push(`reply: ${String((err as { code?: string }).code)}`);
      return;
    }
  }
}

const listener = worker.listen({ host: '127.0.0.1', port: 0 }, (ep) => {
  stats.connected++;
  ep.on('error', (err) => {
    stats.errors++;
    stats.errorCodes.push(`error: ${err.code}`);
  });
  ep.on('close', () => {
    stats.closes++;
    if (ep.closedByPeer) stats.closedByPeer++;
  });
  const id = ++connections;
  ep.tagSend(key, 1n).catch(() => undefined); // a client that leaves at once need not get them
  ep.tagSend(new BigUint64Array([BigInt(id)]), 2n).catch(() => undefined);
  void serveRpc(ep, id);
});

worker.setAmHandler(1, (msg) => {
  const header = msg.header.slice();
  void msg.receive().then((data) => {
    setTimeout(() => {
      msg.replyEndpoint?.amSend(2, header, data).catch(() => undefined);
    }, config.replyDelayMs ?? 0);
  });
});

process.on('message', (command: { type: string }) => {
  switch (command.type) {
    case 'stats':
      send({ type: 'stats', ...stats });
      break;
    case 'exit':
      listener.close();
      void context.close().then(() => process.exit(0));
      break;
  }
});

send({ type: 'ready', port: listener.port });
