/**
 * Errors raised by ucxx-ts. A failed UCX operation is a `UcxError` carrying the UCS status (`status`, the
 * number) and its name (`code`, such as 'UCS_ERR_CONNECTION_RESET'), as a subclass per status like ucxx's
 * `ucxx::CanceledError`. Misuse of the API is an `InvalidArgumentError` (a TypeError, 'UCXX_ERR_INVALID_ARG'),
 * an `ArgumentOutOfRangeError` (a RangeError, 'UCXX_ERR_OUT_OF_RANGE') or one of the other `UCXX_ERR_*`
 * errors below; every class has a stable `code`.
 */
import { statusName } from './ffi/index.js';
import { InvalidArgumentError } from './internal/misuse-errors.js';
import { show } from './internal/bytes.js';

export { UcxLibraryNotFoundError, UnsupportedUcxVersionError } from './ffi/index.js';
export { RemoteKeyFormatError } from './internal/remote-key-format-error.js';
export { WorkerAddressFormatError } from './internal/worker-address.js';
export { UcxxHeaderFormatError, UcxxCudaFrameError, type UcxxHeaderKind } from './internal/ucxx-header-error.js';
export { HandshakeError, MessageFormatError, type HandshakeFailure } from './ucxx-python/errors.js';
// Misuse errors (defined apart, free of imports, so that every module can use them however early it loads).
export {
  InvalidArgumentError, ArgumentOutOfRangeError, InsufficientMemoryError, IllegalConstructorError, InvalidStateError,
} from './internal/misuse-errors.js';

/** A UCX operation failed with a UCS error status. */
export class UcxError extends Error {
  override name = 'UcxError';
  /** The `ucs_status_t` value (negative). */
  readonly status: number;
  /** The status name, e.g. 'UCS_ERR_CANCELED'. */
  readonly code: string;

  constructor(status: number, message?: string, options?: ErrorOptions) {
    const code = typeof status === 'number' ? statusName(status) : 'UCS_ERR_UNKNOWN';
    const text = message === undefined ? undefined : typeof message === 'string' ? message : show(message);
    super(text === undefined ? `${code} (${show(status)})` : `${text}: ${code} (${show(status)})`, options);
    this.status = status;
    this.code = code;
  }
}

// One class per UCS status, as ucxx has. The constructors take (message?) and fix the status.
function statusClass(status: number, className: string) {
  const cls = class extends UcxError {
    constructor(message?: string, options?: ErrorOptions) {
      super(status, message, options);
      this.name = className;
    }
  };
  Object.defineProperty(cls, 'name', { value: className });
  return cls;
}

export const NoMessageError = statusClass(-1, 'NoMessageError');
export const NoResourceError = statusClass(-2, 'NoResourceError');
export const IoError = statusClass(-3, 'IoError');
export const NoMemoryError = statusClass(-4, 'NoMemoryError');
export const InvalidParamError = statusClass(-5, 'InvalidParamError');
export const UnreachableError = statusClass(-6, 'UnreachableError');
export const InvalidAddressError = statusClass(-7, 'InvalidAddressError');
export const NotImplementedError = statusClass(-8, 'NotImplementedError');
export const MessageTruncatedError = statusClass(-9, 'MessageTruncatedError');
export const NoProgressError = statusClass(-10, 'NoProgressError');
export const BufferTooSmallError = statusClass(-11, 'BufferTooSmallError');
export const NoElementError = statusClass(-12, 'NoElementError');
export const SomeConnectsFailedError = statusClass(-13, 'SomeConnectsFailedError');
export const NoDeviceError = statusClass(-14, 'NoDeviceError');
export const BusyError = statusClass(-15, 'BusyError');
export const CanceledError = statusClass(-16, 'CanceledError');
export const ShmemSegmentError = statusClass(-17, 'ShmemSegmentError');
export const AlreadyExistsError = statusClass(-18, 'AlreadyExistsError');
export const OutOfRangeError = statusClass(-19, 'OutOfRangeError');
export const TimedOutError = statusClass(-20, 'TimedOutError');
export const ExceedsLimitError = statusClass(-21, 'ExceedsLimitError');
export const UnsupportedError = statusClass(-22, 'UnsupportedError');
export const RejectedError = statusClass(-23, 'RejectedError');
export const NotConnectedError = statusClass(-24, 'NotConnectedError');
export const ConnectionResetError = statusClass(-25, 'ConnectionResetError');
export const EndpointTimeoutError = statusClass(-80, 'EndpointTimeoutError');

export type NoMessageError = InstanceType<typeof NoMessageError>;
export type CanceledError = InstanceType<typeof CanceledError>;
export type MessageTruncatedError = InstanceType<typeof MessageTruncatedError>;
export type ConnectionResetError = InstanceType<typeof ConnectionResetError>;
export type EndpointTimeoutError = InstanceType<typeof EndpointTimeoutError>;
export type UnreachableError = InstanceType<typeof UnreachableError>;
export type InvalidParamError = InstanceType<typeof InvalidParamError>;
export type RejectedError = InstanceType<typeof RejectedError>;
export type TimedOutError = InstanceType<typeof TimedOutError>;

const BY_STATUS = new Map<number, new (message?: string, options?: ErrorOptions) => UcxError>([
  [-1, NoMessageError], [-2, NoResourceError], [-3, IoError], [-4, NoMemoryError], [-5, InvalidParamError],
  [-6, UnreachableError], [-7, InvalidAddressError], [-8, NotImplementedError], [-9, MessageTruncatedError],
  [-10, NoProgressError], [-11, BufferTooSmallError], [-12, NoElementError], [-13, SomeConnectsFailedError],
  [-14, NoDeviceError], [-15, BusyError], [-16, CanceledError], [-17, ShmemSegmentError],
  [-18, AlreadyExistsError], [-19, OutOfRangeError], [-20, TimedOutError], [-21, ExceedsLimitError],
  [-22, UnsupportedError], [-23, RejectedError], [-24, NotConnectedError], [-25, ConnectionResetError],
  [-80, EndpointTimeoutError],
]);

/** The error for a UCS status: the subclass for that status, or a plain UcxError. */
export function errorFromStatus(status: number, message?: string): UcxError {
  if (typeof status !== 'number') throw new InvalidArgumentError(`status must be a number (a ucs_status_t), got ${show(status)}`);
  const cls = BY_STATUS.get(status);
  return cls === undefined ? new UcxError(status, message) : new cls(message);
}

/** Throws the error for `status` unless it is UCS_OK. */
export function check(status: number, what: string): void {
  if (typeof status !== 'number') throw new InvalidArgumentError(`status must be a number (a ucs_status_t), got ${show(status)}`);
  if (status !== 0) throw errorFromStatus(status, what);
}

/**
 * `worker.connect()` found nobody listening at the address (UCX reports UCS_ERR_NOT_CONNECTED or
 * UCS_ERR_UNREACHABLE for a refused TCP connection, or UCS_ERR_REJECTED when the listener rejects it).
 * A NotConnectedError (status -24) whatever UCX said, with UCX's own status in `ucxStatus`.
 */
export class ConnectionRefusedError extends NotConnectedError {
  /** The status UCX reported. */
  readonly ucxStatus: number;
  /** Where the connection was refused. */
  readonly address: string;
  constructor(address: string, ucxStatus: number, options?: ErrorOptions) {
    super(`connect to ${address}: nobody listens there (connection refused; UCX said ${statusName(ucxStatus)})`, options);
    this.name = 'ConnectionRefusedError';
    this.ucxStatus = ucxStatus;
    this.address = address;
  }
}

/** An object was used after `close()` (or after its parent closed). */
export class ClosedError extends Error {
  override readonly name = 'ClosedError';
  readonly code = 'UCXX_ERR_CLOSED';
  constructor(what: string) {
    super(`${what} is closed`);
  }
}

/**
 * An RMA operation that the remote key's access rights do not allow (a put through a key exported
 * read-only, a get through a write-only one). UCX 1.13 does not enforce these rights on its shared-memory
 * and TCP transports, so ucxx-ts checks them itself for keys that carry them.
 */
export class RemoteAccessError extends Error {
  override readonly name = 'RemoteAccessError';
  readonly code = 'UCXX_ERR_REMOTE_ACCESS';
}

/** An option given to ucp_config_modify that this UCX does not know, or a value it refuses. */
export class ConfigError extends UcxError {
  override name = 'ConfigError';
  /** The option name as given (without the UCX_ prefix). */
  readonly option: string;
  constructor(status: number, option: string, value: string) {
    super(status, `UCX configuration option ${option}=${JSON.stringify(value)} was refused`);
    this.option = option;
  }
}
