/**
 * How large a UCX-allocated region this machine can back. `ucp_mem_map(UCP_MEM_MAP_ALLOCATE)` takes its
 * memory from shared memory: a System V segment when the kernel's limits allow (kernel.shmmax,
 * kernel.shmall), else a file in /dev/shm that UCX 1.13 writes through, page by page, to make sure it is
 * backed (uct_posix_test_mem). Asked for more than the machine has, it does not fail: it fills /dev/shm
 * (tmpfs, that is RAM) until the kernel kills the process, and the half-written file stays behind. So
 * ucxx-ts refuses a size above both shared-memory limits, or above the memory available, before UCX
 * sees it.
 */
import { readFileSync, statfsSync } from 'node:fs';
import * as os from 'node:os';
import { InsufficientMemoryError } from '../errors/misuse.js';

const PAGE = 4096;

function readLimit(file: string): number | undefined {
  try {
    const value = Number(readFileSync(file, 'utf8').trim());
    return Number.isFinite(value) && value >= 0 ? value : undefined;
  } catch {
    return undefined;
  }
}

let sysvLimit: number | undefined | null = null;

/** The largest System V segment the kernel allows (undefined where there is no /proc to ask). */
function sysvSegmentLimit(): number | undefined {
  if (sysvLimit === null) {
    const shmmax = readLimit('/proc/sys/kernel/shmmax');
    const shmall = readLimit('/proc/sys/kernel/shmall');
    sysvLimit = shmmax === undefined || shmall === undefined ? undefined : Math.min(shmmax, shmall * PAGE);
  }
  return sysvLimit;
}

/** Free space in /dev/shm (undefined where there is none). */
function devShmFree(): number | undefined {
  try {
    const stats = statfsSync('/dev/shm');
    return stats.bavail * stats.bsize;
  } catch {
    return undefined;
  }
}

/** The memory this process can still use: available memory, within a cgroup limit if there is one. */
function availableMemory(): number {
  let available = os.freemem(); // MemAvailable on Linux
  const constrained = (process as { constrainedMemory?: () => number | undefined }).constrainedMemory?.();
  if (constrained !== undefined && constrained > 0 && constrained < available) available = constrained;
  return available;
}

/** Throws InsufficientMemoryError when a UCX-allocated region of `size` bytes cannot be backed. */
export function checkAllocatable(size: number): void {
  const available = availableMemory();
  if (size > available) {
    throw new InsufficientMemoryError(
      `createMemoryHandle: ${size} bytes is more than the ${available} bytes of memory available on this machine`,
    );
  }
  const shm = devShmFree();
  const sysv = sysvSegmentLimit();
  if (shm === undefined && sysv === undefined) return; // not Linux-like: UCX falls back to plain memory
  if (size > Math.max(shm ?? 0, sysv ?? 0)) {
    throw new InsufficientMemoryError(
      `createMemoryHandle: ${size} bytes does not fit in shared memory (${shm ?? 0} bytes free in /dev/shm, ` +
      `System V segments up to ${sysv ?? 0} bytes)`,
    );
  }
}
