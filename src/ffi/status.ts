/**
 * UCS status codes (`ucs/type/status.h`). `ucs_status_t` is a packed enum: one signed byte on the wire of
 * every FFI signature in this folder.
 */
export const UCS_OK = 0;
export const UCS_INPROGRESS = 1;

/** Every named status of UCX 1.13, by value. */
export const STATUS_NAMES: ReadonlyMap<number, string> = new Map<number, string>([
  [0, 'UCS_OK'],
  [1, 'UCS_INPROGRESS'],
  [-1, 'UCS_ERR_NO_MESSAGE'],
  [-2, 'UCS_ERR_NO_RESOURCE'],
  [-3, 'UCS_ERR_IO_ERROR'],
  [-4, 'UCS_ERR_NO_MEMORY'],
  [-5, 'UCS_ERR_INVALID_PARAM'],
  [-6, 'UCS_ERR_UNREACHABLE'],
  [-7, 'UCS_ERR_INVALID_ADDR'],
  [-8, 'UCS_ERR_NOT_IMPLEMENTED'],
  [-9, 'UCS_ERR_MESSAGE_TRUNCATED'],
  [-10, 'UCS_ERR_NO_PROGRESS'],
  [-11, 'UCS_ERR_BUFFER_TOO_SMALL'],
  [-12, 'UCS_ERR_NO_ELEM'],
  [-13, 'UCS_ERR_SOME_CONNECTS_FAILED'],
  [-14, 'UCS_ERR_NO_DEVICE'],
  [-15, 'UCS_ERR_BUSY'],
  [-16, 'UCS_ERR_CANCELED'],
  [-17, 'UCS_ERR_SHMEM_SEGMENT'],
  [-18, 'UCS_ERR_ALREADY_EXISTS'],
  [-19, 'UCS_ERR_OUT_OF_RANGE'],
  [-20, 'UCS_ERR_TIMED_OUT'],
  [-21, 'UCS_ERR_EXCEEDS_LIMIT'],
  [-22, 'UCS_ERR_UNSUPPORTED'],
  [-23, 'UCS_ERR_REJECTED'],
  [-24, 'UCS_ERR_NOT_CONNECTED'],
  [-25, 'UCS_ERR_CONNECTION_RESET'],
  [-40, 'UCS_ERR_FIRST_LINK_FAILURE'],
  [-59, 'UCS_ERR_LAST_LINK_FAILURE'],
  [-60, 'UCS_ERR_FIRST_ENDPOINT_FAILURE'],
  [-80, 'UCS_ERR_ENDPOINT_TIMEOUT'],
  [-89, 'UCS_ERR_LAST_ENDPOINT_FAILURE'],
  [-100, 'UCS_ERR_LAST'],
]);

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
