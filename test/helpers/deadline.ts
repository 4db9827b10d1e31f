/** Deadlines for waits in tests: a wait that does not end fails in seconds, saying what it waited for. */

/**
 * `promise`, or a rejection naming `what` once `ms` have passed. `what` may be a function, read only
 * then (a peer's output so far, say).
 */
export function within<T>(promise: PromiseLike<T>, ms: number, what: string | (() => string)): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${typeof what === 'function' ? what() : what}`)), ms);
  });
  return Promise.race([Promise.resolve(promise), timeout]).finally(() => clearTimeout(timer));
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Checks `condition` every `stepMs` until it holds (true) or `ms` have passed (false): for a state that
 * another process or UCX's own thread changes, with no event to await. The caller asserts the result
 * with the message that says what it waited for.
 */
export async function eventually(condition: () => boolean, ms: number, stepMs = 5): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() >= deadline) return false;
    await sleep(stepMs);
  }
  return true;
}
