/**
 * A newcomer's client that connects and leaves at once: `exit` ends the process right after the
 * connect, `close` closes its context first. Usage: node leave-at-once.js '{"port": N, "how": "exit"}'
 */
import { Context } from 'ucxx-ts';

const { port, how } = JSON.parse(process.argv[2] ?? '{}') as { port: number; how: 'exit' | 'close' };
const context = new Context();
const worker = context.createWorker();
await worker.connect('127.0.0.1', port);
if (how === 'exit') process.exit(0);
await context.close();
