/**
 * How many shared-memory segments this process maps (/dev/shm files and System V segments in
 * /proc/self/maps): UCX maps a peer's segments once per endpoint to it, so the count follows the
 * shared-memory endpoints that UCX holds, closed ones included.
 */
import { readFileSync } from 'node:fs';

export function sharedMappings(): number {
  return readFileSync('/proc/self/maps', 'utf8').split('\n').filter((line) => /\/dev\/shm\/|\/SYSV[0-9a-f]+/.test(line)).length;
}
