/**
 * Runs a test peer (a compiled script from build/test/peers) as a separate Node process, talking to it
 * over the IPC channel for control only: every byte under test moves through UCX.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import { peerEnvironment } from './env.js';

const PEERS = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'peers');

export interface PeerMessage {
  type: string;
  [key: string]: unknown;
}

/** Runs a peer through another program (e.g. in a network namespace) instead of forking it directly. */
export interface PeerLaunch {
  /** Program and arguments that end by running `node <script> <config>` (appended to them). */
  readonly wrapper: readonly string[];
  /** The peer's whole environment (nothing is inherited). */
  readonly env: NodeJS.ProcessEnv;
}

/**
 * Every peer process still running. A peer must not outlive its test file, whatever the outcome: the
 * file's process kills what is left when it exits, and when the test runner ends it by a signal.
 */
const running = new Set<ChildProcess>();
function killRunning(): void {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
}
process.once('exit', killRunning);
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    killRunning();
    process.kill(process.pid, signal);
  });
}

export class Peer {
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly #inbox: PeerMessage[] = [];
  readonly #waiters: { type: string; resolve: (m: PeerMessage) => void; reject: (e: Error) => void }[] = [];
  #stderr = '';
  #dead = false;
  /** What the peer reported in an 'error' message, if it did. */
  #failure: Error | undefined;

  private constructor(script: string, config: unknown, env: NodeJS.ProcessEnv, launch?: PeerLaunch) {
    const args = [path.join(PEERS, `${script}.js`), JSON.stringify(config ?? {})];
    this.child = launch === undefined
      ? fork(args[0] as string, args.slice(1), { env: peerEnvironment(env), stdio: ['ignore', 'inherit', 'pipe', 'ipc'] })
      // The IPC channel is fd 3 (NODE_CHANNEL_FD), which survives the wrapper's exec calls.
      : spawn(launch.wrapper[0] as string, [...launch.wrapper.slice(1), process.execPath, ...args], {
        env: { ...launch.env, ...env },
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      });
    const capture = (chunk: Buffer): void => {
      this.#stderr += chunk.toString();
    };
    this.child.stderr?.on('data', capture);
    this.child.stdout?.on('data', capture);
    this.child.on('message', (message: PeerMessage) => {
      if (message.type === 'error' && !this.#waiters.some((w) => w.type === 'error')) {
        // The peer failed (test/helpers/peer-errors.ts, or an error it reports itself): whoever waits,
        // and whoever asks from now on, learns it at once instead of waiting out a timeout.
        this.#failure ??= new Error(`peer ${script} reported: ${String(message['message'])}\n` +
          `${String(message['stack'] ?? '')}\nstderr:\n${this.#stderr}`);
        for (const w of this.#waiters.splice(0)) w.reject(this.#failure);
        return;
      }
      const i = this.#waiters.findIndex((w) => w.type === message.type);
      if (i >= 0) {
        const [waiter] = this.#waiters.splice(i, 1);
        waiter?.resolve(message);
      } else this.#inbox.push(message);
    });
    running.add(this.child);
    this.exited = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => {
        running.delete(this.child);
        this.#dead = true;
        for (const w of this.#waiters.splice(0)) {
          w.reject(new Error(`peer ${script} exited (code ${code}, signal ${signal}) while we waited for ` +
            `'${w.type}'; stderr:\n${this.#stderr}`));
        }
        resolve({ code, signal });
      });
    });
  }

  /** Starts `build/test/peers/<script>.js` with a JSON config as its argument. */
  static start(script: string, config: unknown = {}, env: NodeJS.ProcessEnv = {}): Peer {
    return new Peer(script, config, env);
  }

  /** Starts `build/test/peers/<script>.js` through `launch.wrapper`, with `launch.env` plus `env` only. */
  static launch(launch: PeerLaunch, script: string, config: unknown = {}, env: NodeJS.ProcessEnv = {}): Peer {
    return new Peer(script, config, env, launch);
  }

  /** What the peer wrote to stderr so far (and to stdout, when launched through a wrapper). */
  get stderr(): string {
    return this.#stderr;
  }

  send(message: PeerMessage): void {
    // With a callback, a send to a peer that just died fails here (its 'exit' then rejects the waiters
    // with its stderr) instead of as an uncaught 'error' event of the child process.
    this.child.send(message, (err) => {
      if (err !== null && err !== undefined && this.#failure === undefined && !this.#dead) {
        this.#failure = new Error(`sending '${message.type}' to the peer failed (${err.message}); stderr:\n${this.#stderr}`);
        for (const w of this.#waiters.splice(0)) w.reject(this.#failure);
      }
    });
  }

  /**
   * The next message of `type` (messages of other types wait in the inbox). Rejects at once when the
   * peer has reported an error or exited, and after `timeoutMs` otherwise.
   */
  next(type: string, timeoutMs = 30_000): Promise<PeerMessage> {
    const i = this.#inbox.findIndex((m) => m.type === type);
    if (i >= 0) return Promise.resolve(this.#inbox.splice(i, 1)[0] as PeerMessage);
    if (this.#failure !== undefined && type !== 'error') return Promise.reject(this.#failure);
    if (this.#dead) {
      const how = `code ${String(this.child.exitCode)}, signal ${String(this.child.signalCode)}`;
      return Promise.reject(new Error(`peer is dead (${how}); stderr:\n${this.#stderr}`));
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`timed out after ${timeoutMs} ms waiting for '${type}' from the peer; stderr:\n${this.#stderr}`));
      }, timeoutMs);
      this.#waiters.push({
        type,
        resolve: (m) => { clearTimeout(timer); resolve(m); },
        reject: (e) => { clearTimeout(timer); reject(e); },
      });
    });
  }

  /** Sends a command and waits for the reply of type `replyType`. */
  async call(message: PeerMessage, replyType: string, timeoutMs?: number): Promise<PeerMessage> {
    const reply = this.next(replyType, timeoutMs);
    this.send(message);
    return reply;
  }

  /** Asks the peer to exit and waits; kills it if it does not within the timeout. */
  async stop(timeoutMs = 10_000): Promise<number | null> {
    if (this.#dead) return (await this.exited).code;
    this.send({ type: 'exit' });
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    const { code } = await this.exited;
    clearTimeout(timer);
    return code;
  }
}
