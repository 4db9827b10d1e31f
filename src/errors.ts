/**
 * Errors raised by ucxx-ts. A failed UCX operation is a `UcxError` carrying the UCS status (`status`, the
 * number) and its name (`code`, such as 'UCS_ERR_CONNECTION_RESET'), as a subclass per status like ucxx's
 * `ucxx::CanceledError`. Misuse of the API is an `InvalidArgumentError` (a TypeError, 'UCXX_ERR_INVALID_ARG'),
 * an `ArgumentOutOfRangeError` (a RangeError, 'UCXX_ERR_OUT_OF_RANGE') or one of the other `UCXX_ERR_*`
 * errors below; every class has a stable `code`.
 */
import {
  UCS_ERR_ALREADY_EXISTS, UCS_ERR_BUFFER_TOO_SMALL, UCS_ERR_BUSY, UCS_ERR_CANCELED, UCS_ERR_CONNECTION_RESET,
  UCS_ERR_ENDPOINT_TIMEOUT, UCS_ERR_EXCEEDS_LIMIT, UCS_ERR_INVALID_ADDR, UCS_ERR_INVALID_PARAM,
  UCS_ERR_IO_ERROR, UCS_ERR_MESSAGE_TRUNCATED, UCS_ERR_NOT_CONNECTED, UCS_ERR_NOT_IMPLEMENTED,
  UCS_ERR_NO_DEVICE, UCS_ERR_NO_ELEM, UCS_ERR_NO_MEMORY, UCS_ERR_NO_MESSAGE, UCS_ERR_NO_PROGRESS,
  UCS_ERR_NO_RESOURCE, UCS_ERR_OUT_OF_RANGE, UCS_ERR_REJECTED, UCS_ERR_SHMEM_SEGMENT,
  UCS_ERR_SOME_CONNECTS_FAILED, UCS_ERR_TIMED_OUT, UCS_ERR_UNREACHABLE, UCS_ERR_UNSUPPORTED, statusName,
} from './ffi/index.js';
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
  /** The class name: 'UcxError', or the status's subclass ('CanceledError', ...). */
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
/** The subclass for each status that has one: filled by statusClass, the one list of them. */
const BY_STATUS = new Map<number, new (message?: string, options?: ErrorOptions) => UcxError>();

/** The class of the errors of one UCS status: `new CanceledError(message?)`, and an `instanceof` target. */
export interface UcxErrorClass {
  new (message?: string, options?: ErrorOptions): UcxError;
  /** The prototype of its instances (what `instanceof` checks). */
  readonly prototype: UcxError;
}

function statusClass(status: number, className: string): UcxErrorClass {
  const cls = class extends UcxError {
    constructor(message?: string, options?: ErrorOptions) {
      super(status, message, options);
      this.name = className;
    }
  };
  Object.defineProperty(cls, 'name', { value: className });
  BY_STATUS.set(status, cls);
  return cls;
}

/** No message was pending: `UCS_ERR_NO_MESSAGE`. */
export const NoMessageError = statusClass(UCS_ERR_NO_MESSAGE, 'NoMessageError');
/** UCX ran out of a resource for now (send queue, descriptors): `UCS_ERR_NO_RESOURCE`. */
export const NoResourceError = statusClass(UCS_ERR_NO_RESOURCE, 'NoResourceError');
/** An input/output error: `UCS_ERR_IO_ERROR`. */
export const IoError = statusClass(UCS_ERR_IO_ERROR, 'IoError');
/** UCX could not allocate memory: `UCS_ERR_NO_MEMORY`. */
export const NoMemoryError = statusClass(UCS_ERR_NO_MEMORY, 'NoMemoryError');
/** UCX refused a parameter: `UCS_ERR_INVALID_PARAM`. */
export const InvalidParamError = statusClass(UCS_ERR_INVALID_PARAM, 'InvalidParamError');
/** The destination cannot be reached (in UCX 1.13 also: endpoints whose UCP features differ): `UCS_ERR_UNREACHABLE`. */
export const UnreachableError = statusClass(UCS_ERR_UNREACHABLE, 'UnreachableError');
/** An address UCX does not accept: `UCS_ERR_INVALID_ADDR`. */
export const InvalidAddressError = statusClass(UCS_ERR_INVALID_ADDR, 'InvalidAddressError');
/** The operation is not implemented by this UCX: `UCS_ERR_NOT_IMPLEMENTED`. */
export const NotImplementedError = statusClass(UCS_ERR_NOT_IMPLEMENTED, 'NotImplementedError');
/** The message was longer than the receive buffer (the message is consumed): `UCS_ERR_MESSAGE_TRUNCATED`. */
export const MessageTruncatedError = statusClass(UCS_ERR_MESSAGE_TRUNCATED, 'MessageTruncatedError');
/** No progress could be made: `UCS_ERR_NO_PROGRESS`. */
export const NoProgressError = statusClass(UCS_ERR_NO_PROGRESS, 'NoProgressError');
/** A buffer is too small for the operation: `UCS_ERR_BUFFER_TOO_SMALL`. */
export const BufferTooSmallError = statusClass(UCS_ERR_BUFFER_TOO_SMALL, 'BufferTooSmallError');
/** No such element (for example an unknown configuration option): `UCS_ERR_NO_ELEM`. */
export const NoElementError = statusClass(UCS_ERR_NO_ELEM, 'NoElementError');
/** Some of the connections failed: `UCS_ERR_SOME_CONNECTS_FAILED`. */
export const SomeConnectsFailedError = statusClass(UCS_ERR_SOME_CONNECTS_FAILED, 'SomeConnectsFailedError');
/** No device is available for the operation: `UCS_ERR_NO_DEVICE`. */
export const NoDeviceError = statusClass(UCS_ERR_NO_DEVICE, 'NoDeviceError');
/** The resource is busy: `UCS_ERR_BUSY`. */
export const BusyError = statusClass(UCS_ERR_BUSY, 'BusyError');
/** The operation was cancelled (`cancel()`, an `AbortSignal`, or its endpoint or worker closed): `UCS_ERR_CANCELED`. */
export const CanceledError = statusClass(UCS_ERR_CANCELED, 'CanceledError');
/** A shared-memory segment could not be used: `UCS_ERR_SHMEM_SEGMENT`. */
export const ShmemSegmentError = statusClass(UCS_ERR_SHMEM_SEGMENT, 'ShmemSegmentError');
/** The object already exists: `UCS_ERR_ALREADY_EXISTS`. */
export const AlreadyExistsError = statusClass(UCS_ERR_ALREADY_EXISTS, 'AlreadyExistsError');
/** A value is out of range: `UCS_ERR_OUT_OF_RANGE`. */
export const OutOfRangeError = statusClass(UCS_ERR_OUT_OF_RANGE, 'OutOfRangeError');
/** The operation did not finish in time: `UCS_ERR_TIMED_OUT`. */
export const TimedOutError = statusClass(UCS_ERR_TIMED_OUT, 'TimedOutError');
/** A limit was exceeded: `UCS_ERR_EXCEEDS_LIMIT`. */
export const ExceedsLimitError = statusClass(UCS_ERR_EXCEEDS_LIMIT, 'ExceedsLimitError');
/** The operation is not supported here: `UCS_ERR_UNSUPPORTED`. */
export const UnsupportedError = statusClass(UCS_ERR_UNSUPPORTED, 'UnsupportedError');
/** The peer rejected the operation (for example a connection or an active message): `UCS_ERR_REJECTED`. */
export const RejectedError = statusClass(UCS_ERR_REJECTED, 'RejectedError');
/** There is no connection (a refused connect is the subclass ConnectionRefusedError): `UCS_ERR_NOT_CONNECTED`. */
export const NotConnectedError = statusClass(UCS_ERR_NOT_CONNECTED, 'NotConnectedError');
/** The peer's connection closed while something waited on it: `UCS_ERR_CONNECTION_RESET`. */
export const ConnectionResetError = statusClass(UCS_ERR_CONNECTION_RESET, 'ConnectionResetError');
/** The peer stopped answering (UCX's timers, or `failureTimeout`): `UCS_ERR_ENDPOINT_TIMEOUT`. */
export const EndpointTimeoutError = statusClass(UCS_ERR_ENDPOINT_TIMEOUT, 'EndpointTimeoutError');

/** An instance of {@link NoMessageError}. */
export type NoMessageError = InstanceType<typeof NoMessageError>;
/** An instance of {@link CanceledError}. */
export type CanceledError = InstanceType<typeof CanceledError>;
/** An instance of {@link MessageTruncatedError}. */
export type MessageTruncatedError = InstanceType<typeof MessageTruncatedError>;
/** An instance of {@link ConnectionResetError}. */
export type ConnectionResetError = InstanceType<typeof ConnectionResetError>;
/** An instance of {@link EndpointTimeoutError}. */
export type EndpointTimeoutError = InstanceType<typeof EndpointTimeoutError>;
/** An instance of {@link UnreachableError}. */
export type UnreachableError = InstanceType<typeof UnreachableError>;
/** An instance of {@link InvalidParamError}. */
export type InvalidParamError = InstanceType<typeof InvalidParamError>;
/** An instance of {@link RejectedError}. */
export type RejectedError = InstanceType<typeof RejectedError>;
/** An instance of {@link TimedOutError}. */
export type TimedOutError = InstanceType<typeof TimedOutError>;



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
  /** Always 'ClosedError'. */
  override readonly name = 'ClosedError';
  /** Always 'UCXX_ERR_CLOSED'. */
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
  /** Always 'RemoteAccessError'. */
  override readonly name = 'RemoteAccessError';
  /** Always 'UCXX_ERR_REMOTE_ACCESS'. */
  readonly code = 'UCXX_ERR_REMOTE_ACCESS';
}

/** An option given to ucp_config_modify that this UCX does not know, or a value it refuses. */
export class ConfigError extends UcxError {
  /** Always 'ConfigError'. */
  override name = 'ConfigError';
  /** The option name as given (without the UCX_ prefix). */
  readonly option: string;
  constructor(status: number, option: string, value: string) {
    super(status, `UCX configuration option ${option}=${JSON.stringify(value)} was refused`);
    this.option = option;
  }
}
