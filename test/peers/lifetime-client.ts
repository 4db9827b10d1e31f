/**
 * Test program for test/lifetime-node.test.ts, written as a user writes a client: no IPC channel (it
 * would keep the process alive by itself), its findings on stdout, and it ends however its objects let
 * it end. Modes (argv[2] is a JSON config with `mode` and the server's `port`):
 * - 'am-reply': `rounds` active-message requests, each reply awaited through a setAmHandler Promise,
 *   then closes the context; prints 'am-reply: ok N'.
 * - 'open-endpoint', 'unref-endpoint', 'unref-worker', 'open-listener', 'unref-listener': opens the
 *   object (and unrefs it), prints 'opened', and leaves it open.
 * - 'until-peer-closes': connects and waits for nothing; prints 'closed by peer' on the endpoint's close.
 * - 'rma-loop': awaits memGet after memGet for `durationMs` beside a 100 ms interval; prints
 *   '{"ticks":N,"ops":M}'.
 * - 'rma-until-failure': awaits memGet after memGet until one fails (prints 'looping' first, then
 *   'noticed NAME CODE' or, after 20 s, 'never noticed').
 * - 'rpc': `connections` times in a row: connect, get the connection's id (tag 2), `rpcs` tag RPCs
 *   (test/peers/lifetime-server.ts), close; prints
 *   '{"replies":N,"rejected":M,"errors":K}'.
 */
import {
  Context, createRemoteKeyFromSerialized, type Endpoint, type Worker, type AmMessage,
} from 'ucxx-ts';

interface Config {
  mode: string;
  port?: number;
  rounds?: number;
  durationMs?: number;
  connections?: number;
  rpcs?: number;
}

const config = JSON.parse(process.argv[2] ?? '{}') as Config;
const port = config.port ?? 0;
const print = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

const context = new Context();
const worker: Worker = context.createWorker();

async function keyOf(ep: Endpoint): Promise<ReturnType<typeof createRemoteKeyFromSerialized>> {
  const buffer = new Uint8Array(4096);
  const { length } = await ep.tagRecv(buffer, 1n);
  return createRemoteKeyFromSerialized(ep, buffer.subarray(0, length));
}

switch (config.mode) {
  case 'am-reply': {
    const ep = await worker.connect('127.0.0.1', port);
    let answer: ((msg: AmMessage) => void) | undefined;
    worker.setAmHandler(2, (msg) => answer?.(msg));
    const rounds = config.rounds ?? 3;
    for (let i = 0; i < rounds; i++) {
      const reply = new Promise<AmMessage>((resolve) => {
        answer = resolve;
      });
      await ep.amSend(1, new Uint8Array([i]), new Uint8Array([i, 1, 2, 3]), { reply: true });
      const msg = await reply;
      const data = await msg.receive();
      if (msg.header[0] !== i || data[0] !== i || data.length !== 4) throw new Error(`reply ${i} is wrong`);
    }
    print(`am-reply: ok ${rounds}`);
    await context.close();
    break;
  }
  case 'open-endpoint':
    await worker.connect('127.0.0.1', port);
    print('opened');
    break;
  case 'unref-endpoint':
    (await worker.connect('127.0.0.1', port)).unref();
    print('opened');
    break;
  case 'unref-worker':
    worker.listen({ host: '127.0.0.1', port: 0 });
    await worker.connect('127.0.0.1', port);
    worker.unref();
    print('opened');
    break;
  case 'open-listener':
    worker.listen({ host: '127.0.0.1', port: 0 });
    print('opened');
    break;
  case 'unref-listener':
    worker.listen({ host: '127.0.0.1', port: 0 }).unref();
    print('opened');
    break;
  case 'until-peer-closes': {
    const ep = await worker.connect('127.0.0.1', port);
    ep.on('close', () => print(ep.closedByPeer ? 'closed by peer' : `closed: ${String(ep.failure)}`));
    print('opened');
    break;
  }
  case 'rma-loop': {
    const ep = await worker.connect('127.0.0.1', port);
    const key = await keyOf(ep);
    const buffer = new Uint8Array(8);
    let ticks = 0;
    const interval = setInterval(() => ticks++, 100);
    const end = Date.now() + (config.durationMs ?? 1000);
    let ops = 0;
    while (Date.now() < end) {
      await ep.memGet(buffer, key, 0);
      ops++;
    }
    clearInterval(interval);
    print(JSON.stringify({ ticks, ops, value: buffer[0] }));
    await context.close();
    break;
  }
  case 'rma-until-failure': {
    const ep = await worker.connect('127.0.0.1', port);
    const key = await keyOf(ep);
    const buffer = new Uint8Array(8);
    print('looping');
    const end = Date.now() + 20_000;
    try {
      while (Date.now() < end) await ep.memGet(buffer, key, 0);
      print('never noticed');
    } catch (err) {
      print(`noticed ${(err as Error).name} ${String((err as { code?: string }).code)}`);
    }
    await context.close();
    break;
  }
  case 'rpc': {
    let replies = 0;
    let rejected = 0;
    let errors = 0;
    const request = new Uint8Array(16);
    const reply = new Uint8Array(16);
    for (let c = 0; c < (config.connections ?? 50); c++) {
      const ep = await worker.connect('127.0.0.1', port);
      ep.on('error', () => errors++);
      const id = new BigUint64Array(1);
      await ep.tagRecv(id, 2n);
      const tag = (10n << 32n) | (id[0] as bigint);
      for (let i = 0; i < (config.rpcs ?? 3); i++) {
        request.fill(i + c);
        const received = ep.tagRecv(reply, 11n);
        try {
          await ep.tagSend(request, tag);
          const { length } = await received;
          if (length !== 16 || reply[15] !== ((i + c) & 0xff)) throw new Error(`reply ${c}/${i} is wrong`);
          replies++;
        } catch (err) {
          rejected++;
          print(`rejected: ${String(err)}`);
        }
      }
      await ep.close();
    }
    print(JSON.stringify({ replies, rejected, errors }));
    await context.close();
    break;
  }
  default:
    throw new Error(`unknown mode ${config.mode}`);
}
