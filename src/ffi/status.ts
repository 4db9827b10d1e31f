/**
 * UCS status codes (`ucs/type/status.h`). `ucs_status_t` is a packed enum: one signed byte on the wire of
 * every FFI signature in this folder. The named constants below are the one list of them.
 */
export const UCS_OK = 0;
export const UCS_INPROGRESS = 1;
export const UCS_ERR_NO_MESSAGE = -1;
export const UCS_ERR_NO_RESOURCE = -2;
export const UCS_ERR_IO_ERROR = -3;
export const UCS_ERR_NO_MEMORY = -4;
export const UCS_ERR_INVALID_PARAM = -5;
export const UCS_ERR_UNREACHABLE = -6;
export const UCS_ERR_INVALID_ADDR = -7;
export const UCS_ERR_NOT_IMPLEMENTED = -8;
export const UCS_ERR_MESSAGE_TRUNCATED = -9;
export const UCS_ERR_NO_PROGRESS = -10;
export const UCS_ERR_BUFFER_TOO_SMALL = -11;
export const UCS_ERR_NO_ELEM = -12;
export const UCS_ERR_SOME_CONNECTS_FAILED = -13;
export const UCS_ERR_NO_DEVICE = -14;
export const UCS_ERR_BUSY = -15;
export const UCS_ERR_CANCELED = -16;
export const UCS_ERR_SHMEM_SEGMENT = -17;
export const UCS_ERR_ALREADY_EXISTS = -18;
export const UCS_ERR_OUT_OF_RANGE = -19;
export const UCS_ERR_TIMED_OUT = -20;
export const UCS_ERR_EXCEEDS_LIMIT = -21;
export const UCS_ERR_UNSUPPORTED = -22;
export const UCS_ERR_REJECTED = -23;
export const UCS_ERR_NOT_CONNECTED = -24;
export const UCS_ERR_CONNECTION_RESET = -25;
export const UCS_ERR_FIRST_LINK_FAILURE = -40;
export const UCS_ERR_LAST_LINK_FAILURE = -59;
export const UCS_ERR_FIRST_ENDPOINT_FAILURE = -60;
export const UCS_ERR_ENDPOINT_TIMEOUT = -80;
export const UCS_ERR_LAST_ENDPOINT_FAILURE = -89;
export const UCS_ERR_LAST = -100;

/** Every named status of UCX 1.13, by value. */
export const STATUS_NAMES: ReadonlyMap<number, string> = new Map<number, string>(
  Object.entries({
    UCS_OK, UCS_INPROGRESS, UCS_ERR_NO_MESSAGE, UCS_ERR_NO_RESOURCE, UCS_ERR_IO_ERROR, UCS_ERR_NO_MEMORY,
    UCS_ERR_INVALID_PARAM, UCS_ERR_UNREACHABLE, UCS_ERR_INVALID_ADDR, UCS_ERR_NOT_IMPLEMENTED,
    UCS_ERR_MESSAGE_TRUNCATED, UCS_ERR_NO_PROGRESS, UCS_ERR_BUFFER_TOO_SMALL, UCS_ERR_NO_ELEM,
    UCS_ERR_SOME_CONNECTS_FAILED, UCS_ERR_NO_DEVICE, UCS_ERR_BUSY, UCS_ERR_CANCELED, UCS_ERR_SHMEM_SEGMENT,
    UCS_ERR_ALREADY_EXISTS, UCS_ERR_OUT_OF_RANGE, UCS_ERR_TIMED_OUT, UCS_ERR_EXCEEDS_LIMIT,
    UCS_ERR_UNSUPPORTED, UCS_ERR_REJECTED, UCS_ERR_NOT_CONNECTED, UCS_ERR_CONNECTION_RESET,
    UCS_ERR_FIRST_LINK_FAILURE, UCS_ERR_LAST_LINK_FAILURE, UCS_ERR_FIRST_ENDPOINT_FAILURE,
    UCS_ERR_ENDPOINT_TIMEOUT, UCS_ERR_LAST_ENDPOINT_FAILURE, UCS_ERR_LAST,
  }).map(([name, value]) => [value, name]),
);

/** The code string of a status: its UCX name, or a range name for the unnamed link/endpoint failures. */
export function statusName(status: number): string {
  const name = STATUS_NAMES.get(status);
  if (name !== undefined) return name;
  if (status <= -40 && status >= -59) return 'UCS_ERR_LINK_FAILURE';
  if (status <= -60 && status >= -89) return 'UCS_ERR_ENDPOINT_FAILURE';
  return `UCS_ERR_UNKNOWN_${status}`;
}

/**
 * `ucs_status_ptr_t` decoding. Values in the top 100 of the address space carry an error status;
 * NULL means "done now".
 */
export const STATUS_PTR_ERR_FIRST = 2n ** 64n - 100n;

/** Returns the status carried by a `ucs_status_ptr_t`, or `UCS_INPROGRESS` for a live request. */
export function statusOfPtr(ptr: bigint | null): number {
  if (ptr === null || ptr === 0n) return UCS_OK;
  if (ptr >= STATUS_PTR_ERR_FIRST) return Number(BigInt.asIntN(8, ptr));
  return UCS_INPROGRESS;
}
