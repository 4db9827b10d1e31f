/**
 * ucxx's echo (its docs' send_recv example, and the shape of python/ucxx/examples/basic.py), in
 * ucxx-ts: a server that receives an object, sends it back and closes; a client that sends one and
 * checks what comes back. Both speak ucxx Python's endpoint handshake, so either side can be ucxx Python.
 *
 *   npm run build && npm run build:test
 *   node build/examples/ucxx-echo.js                    both sides: a child serves, this process connects
 *   node build/examples/ucxx-echo.js server PORT [N]    serve N clients (default: until Ctrl-C); PORT 0 picks one
 *   node build/examples/ucxx-echo.js client HOST PORT   one round trip against a ucxx-ts or ucxx Python server
 *
 * Against ucxx Python (the `libucx` wheel's UCX: UCXX_TS_UCX_LIBDIR, see the README): its echo server is
 *
 *   async def echo(ep):
 *       obj = await ep.recv_obj()
 *       await ep.send_obj(obj)
 *       await ep.close()
 *   listener = ucxx.create_listener(echo, port=13337)
 *
 * and its client `ep = await ucxx.create_endpoint(host, 13337)`, `await ep.send_obj(b'...')`,
 * `await ep.recv_obj()`. The defaults match ucxx's (PEER error handling on UCX 1.19 and newer), so no
 * option is needed on either side.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Context, UCXX_PYTHON_FEATURES } from 'ucxx-ts';

async function serve(port: number, clients: number): Promise<void> {
  await using context = new Context({ features: UCXX_PYTHON_FEATURES });
  const worker = context.createWorker();
  const listener = worker.listen({ port, handshake: 'ucxx-python' });
  console.log(`echo server: listening on port ${listener.port}`);
  let served = 0;
  // One client at a time, as ucxx's example serves them; each answer is sent before the close.
  for await (const ep of listener) {
    try {
      const obj = await ep.recvObj();
      await ep.sendObj(obj);
      console.log(`echo server: echoed ${obj.byteLength} bytes to ${ep.endpoint.remoteAddress?.host ?? 'a client'}`);
    } catch (err) {
      console.error(`echo server: a client failed: ${(err as Error).message}`);
    } finally {
      await ep.close();
    }
    if (++served === clients) break;
  }
  listener.close();
}

async function client(host: string, port: number): Promise<boolean> {
  await using context = new Context({ features: UCXX_PYTHON_FEATURES });
  const worker = context.createWorker();
  const ep = await worker.connect(host, port, { handshake: 'ucxx-python' });
  const message = new TextEncoder().encode(`hello from ucxx-ts, ${new Date().toISOString()}`);
  await ep.sendObj(message);
  // The server closes right after answering: the answer is delivered all the same.
  const back = await ep.recvObj();
  await ep.close();
  const same = Buffer.from(back).equals(Buffer.from(message));
  console.log(same ? `echo client: OK: ${back.byteLength} bytes came back` : 'echo client: the answer differs');
  return same;
}

const [role, a, b] = process.argv.slice(2);
if (role === 'server') {
  await serve(Number(a ?? 13337), b === undefined ? Infinity : Number(b));
} else if (role === 'client') {
  process.exitCode = (await client(a ?? '127.0.0.1', Number(b ?? 13337))) ? 0 : 1;
} else {
  // Both sides: the server runs in a child, and this process connects to the port it reports.
  const child = fork(fileURLToPath(import.meta.url), ['server', '0', '1'], { stdio: ['inherit', 'pipe', 'inherit', 'ipc'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      process.stdout.write(chunk);
      const m = /listening on port (\d+)/.exec(chunk.toString());
      if (m !== null) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`the server exited (${code}) before listening`)));
  });
  const ok = await client('127.0.0.1', port);
  const code = await new Promise<number | null>((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    else child.once('exit', resolve);
  });
  process.exitCode = ok && code === 0 ? 0 : 1;
}
