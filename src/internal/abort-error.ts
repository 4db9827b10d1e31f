/**
 * The error of an operation whose AbortSignal aborted: still a CanceledError (`UCS_ERR_CANCELED`),
 * but its message names the signal's reason ("timed out" for `AbortSignal.timeout()`), and the reason
 * is its `cause`, as Node's own APIs do.
 */
import { CanceledError } from '../errors/index.js';

export function abortError(what: string, reason: unknown): CanceledError {
  const name = (reason as { name?: unknown } | null | undefined)?.name;
  const message = (reason as { message?: unknown } | null | undefined)?.message;
  const detail = typeof message === 'string' && message !== '' ? message : reason === undefined ? '' : String(reason);
  const head = name === 'TimeoutError' ? 'timed out' : 'aborted';
  return new CanceledError(`${what}: ${head}${detail === '' ? '' : ` (${detail})`}`, { cause: reason });
}
