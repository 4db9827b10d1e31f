/**
 * UCX's own ERROR and WARN log lines in a process's output. A clean run prints none: a line that reads
 * like a fault when nothing went wrong teaches users to ignore the ones that matter.
 */
import { strict as assert } from 'node:assert';

/** The lines of `text` that UCX logged at ERROR or WARN level. */
export function ucxLogLines(text: string): string[] {
  return text.split('\n').filter((line) => /\bUCX\s+(ERROR|WARN)\b/.test(line));
}

/** Fails with the offending lines when `text` holds a UCX ERROR or WARN line. */
export function assertNoUcxNoise(text: string, what: string): void {
  const lines = ucxLogLines(text);
  assert.deepEqual(lines, [], `${what} printed UCX ERROR/WARN lines on a clean run:\n${lines.join('\n')}`);
}
