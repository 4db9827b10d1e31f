/** The check for an operation refused before it reached UCX: it returns a Request that has already failed. */
import * as assert from 'node:assert/strict';

type Expected = Parameters<typeof assert.throws>[1];
interface Settled { readonly completed: boolean; readonly error: Error | undefined }

/**
 * Asserts that `call()` does not throw, and that the Request it returns has completed with an error
 * that `expected` matches (a class, a RegExp or a validation function, as for `assert.throws`).
 */
export function failsAtOnce(call: () => Settled, expected: Expected): void {
  let request: Settled;
  try {
    request = call();
  } catch (err) {
    return assert.fail(`the operation threw instead of returning a failed Request: ${String(err)}`);
  }
  assert.equal(request.completed, true, 'the Request has completed');
  assert.ok(request.error !== undefined, 'the Request has failed');
  assert.throws(() => {
    throw request.error;
  }, expected);
}
