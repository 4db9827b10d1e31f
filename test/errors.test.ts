/**
 * Every error class the package exports is in docs/errors.md with its code, and every one answers
 * `instanceof UcxxTsError` and `isUcxxTsError`, while errors not of ucxx-ts do not.
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ucxx from 'ucxx-ts';
import { Context, ClosedError, InvalidArgumentError, UcxxTsError, createRemoteKeyFromSerialized, errorFromStatus, isUcxxTsError } from 'ucxx-ts';
import { ROOT } from './helpers/ucxx-wheel.js';

const TABLE = readFileSync(join(ROOT, 'docs', 'errors.md'), 'utf8');

test('docs/errors.md names every exported error class', () => {
  const classes = Object.entries(ucxx).filter(([name, value]) => typeof value === 'function' && /Error$/.test(name) &&
    (value as { prototype?: unknown }).prototype instanceof Error);
  assert.ok(classes.length >= 40, `${classes.length} error classes exported`);
  for (const [name] of classes) {
    if (name === 'UcxxTsError') continue;
    assert.match(TABLE, new RegExp('`' + name + '`'), `${name} is missing from docs/errors.md`);
  }
});

test('every ucxx-ts error is an UcxxTsError with a code; other errors are not', async () => {
  const samples: unknown[] = [errorFromStatus(-6), new ClosedError('the Worker'), new InvalidArgumentError('x')];
  const context = new Context();
  const worker = context.createWorker();
  const ep = worker.connectToAddress(worker.getAddress());
  samples.push(await Promise.resolve().then(() => createRemoteKeyFromSerialized(ep, new Uint8Array([1, 2, 3]))).catch((err: unknown) => err));
  samples.push(await ep.tagSend(new Uint8Array(1), 'not a tag' as unknown as bigint).promise.catch((err: unknown) => err));
  await context.close();
  samples.push(await worker.flush().promise.catch((err: unknown) => err));
  for (const err of samples) {
    assert.ok(err instanceof UcxxTsError, `${String(err)} is an UcxxTsError`);
    assert.ok(isUcxxTsError(err));
    assert.equal(typeof (err as { code?: unknown }).code, 'string', String(err));
    assert.match((err as { code: string }).code, /^(UCS_|UCXX_ERR_)/);
  }
  for (const other of [new Error('x'), new TypeError('x'), new RangeError('x'), { code: 'UCXX_ERR_CLOSED' }, null, 'x']) {
    assert.equal(other instanceof UcxxTsError, false);
    assert.equal(isUcxxTsError(other), false);
  }
});
