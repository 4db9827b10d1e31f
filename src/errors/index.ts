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
} from '../ffi/index.js';
import { InvalidArgumentError } from './misuse.js';
import { show } from '../internal/bytes.js';

export { UcxLibraryNotFoundError, UnsupportedUcxVersionError } from '../ffi/index.js';
export { RemoteKeyFormatError } from './remote-key-format.js';
export { WorkerAddressFormatError } from '../internal/worker-address.js';
export { UcxxHeaderFormatError, UcxxCudaFrameError, type UcxxHeaderKind } from './ucxx-header.js';
export { HandshakeError, MessageFormatError, type HandshakeFailure } from '../ucxx-python/errors.js';
// Misuse errors (defined apart, free of imports, so that every module can use them however early it loads).
export {
  InvalidArgumentError, ArgumentOutOfRangeError, InsufficientMemoryError, IllegalConstructorError, InvalidStateError,
} from './misuse.js';
import { UCXX_TS_ERROR } from './brand.js';
export { UcxxTsError, isUcxxTsError } from './brand.js';

/**
 * A UCX operation failed with a UCS error status.
 *
 * @example
 * ```ts
 * try {
 *   await ep.flush();
 * } catch (err) {
 *   if (err instanceof UcxError) console.error(err.code, err.status); // e.g. 'UCS_ERR_CONNECTION_RESET' -25
 * }
 * ```
 */
export class UcxError extends Error {
  /** @internal Marks it as ucxx-ts's (errors/brand.ts). */
  readonly [UCXX_TS_ERROR] = true;
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

/**
 * No message was pending: `UCS_ERR_NO_MESSAGE`.
 *
 * @example
 * ```ts
 * const err = errorFromStatus(-1);  // how every status maps to its class
 * err instanceof NoMessageError;    // true; err.code === 'UCS_ERR_NO_MESSAGE'
 * ```
 */
export const NoMessageError = statusClass(UCS_ERR_NO_MESSAGE, 'NoMessageError');
/**
 * UCX ran out of a resource for now (send queue, descriptors): `UCS_ERR_NO_RESOURCE`.
 *
 * @example
 * ```ts
 * try {
 *   await ep.tagSend(data, 1n);
 * } catch (err) {
 *   if (err instanceof NoResourceError) setTimeout(retry, 10); // UCX's queues are full for now: try again
 * }
 * ```
 */
export const NoResourceError = statusClass(UCS_ERR_NO_RESOURCE, 'NoResourceError');
/**
 * An input/output error: `UCS_ERR_IO_ERROR`.
 *
 * @example
 * ```ts
 * ep.on('error', (err) => {
 *   if (err instanceof IoError) console.error(`I/O error on the connection to ${ep.peer}`);
 * });
 * ```
 */
export const IoError = statusClass(UCS_ERR_IO_ERROR, 'IoError');
/**
 * UCX could not allocate memory: `UCS_ERR_NO_MEMORY`.
 *
 * @example
 * ```ts
 * const msg = await ep.amRecv();
 * if (msg.error instanceof NoMemoryError) console.warn('a ucxx AM too large to allocate was dropped');
 * ```
 */
export const NoMemoryError = statusClass(UCS_ERR_NO_MEMORY, 'NoMemoryError');
/**
 * UCX refused a parameter: `UCS_ERR_INVALID_PARAM`.
 *
 * @example
 * ```ts
 * try {
 *   ep = worker.connectToAddress(address, { errorHandling: 'peer' });
 * } catch (err) {
 *   if (err instanceof InvalidParamError) console.error('UCX refused the endpoint parameters:', err.message);
 * }
 * ```
 */
export const InvalidParamError = statusClass(UCS_ERR_INVALID_PARAM, 'InvalidParamError');
/**
 * The destination cannot be reached (in UCX 1.13 also: endpoints whose UCP features differ): `UCS_ERR_UNREACHABLE`.
 *
 * @example
 * ```ts
 * try {
 *   await ep.streamSend(data);
 * } catch (err) {
 *   // UCX 1.13 also says this when the two contexts' features differ: the message names the fix
 *   if (err instanceof UnreachableError) console.error(err.message);
 * }
 * ```
 */
export const UnreachableError = statusClass(UCS_ERR_UNREACHABLE, 'UnreachableError');
/**
 * An address UCX does not accept: `UCS_ERR_INVALID_ADDR`.
 *
 * @example
 * ```ts
 * try {
 *   listener = worker.listen({ host: bindHost, port: 13337 });
 * } catch (err) {
 *   if ((err as UcxError).code === 'UCS_ERR_INVALID_ADDR') console.error(`cannot listen on ${bindHost}`);
 * }
 * ```
 */
export const InvalidAddressError = statusClass(UCS_ERR_INVALID_ADDR, 'InvalidAddressError');
/**
 * The operation is not implemented by this UCX: `UCS_ERR_NOT_IMPLEMENTED`.
 *
 * @example
 * ```ts
 * try {
 *   await ep.atomic('xor', key, 0, 0xffn);
 * } catch (err) {
 *   if (err instanceof NotImplementedError) console.warn('no transport here implements it');
 * }
 * ```
 */
export const NotImplementedError = statusClass(UCS_ERR_NOT_IMPLEMENTED, 'NotImplementedError');
/**
 * The message was longer than the receive buffer (the message is consumed): `UCS_ERR_MESSAGE_TRUNCATED`.
 *
 * @example
 * ```ts
 * const small = new Uint8Array(16);
 * try {
 *   await worker.tagRecv(small, 7n);
 * } catch (err) {
 *   if (err instanceof MessageTruncatedError) console.warn('longer than 16 bytes: that message is gone');
 * }
 * ```
 */
export const MessageTruncatedError = statusClass(UCS_ERR_MESSAGE_TRUNCATED, 'MessageTruncatedError');
/**
 * No progress could be made: `UCS_ERR_NO_PROGRESS`.
 *
 * @example
 * ```ts
 * try {
 *   await worker.flush();
 * } catch (err) {
 *   if (err instanceof NoProgressError) await worker.close(); // UCX cannot move forward on this worker
 * }
 * ```
 */
export const NoProgressError = statusClass(UCS_ERR_NO_PROGRESS, 'NoProgressError');
/**
 * A buffer is too small for the operation: `UCS_ERR_BUFFER_TOO_SMALL`.
 *
 * @example
 * ```ts
 * const request = ep.memGet(destination, key, 0);
 * request.catch((err: UcxError) => {
 *   if (err.code === 'UCS_ERR_BUFFER_TOO_SMALL') console.error('UCX needed a larger buffer:', err.message);
 * });
 * ```
 */
export const BufferTooSmallError = statusClass(UCS_ERR_BUFFER_TOO_SMALL, 'BufferTooSmallError');
/**
 * No such element: `UCS_ERR_NO_ELEM`. (An unknown configuration option has this status too, but is
 * raised as the more specific ConfigError.)
 *
 * @example
 * ```ts
 * try {
 *   new Context({ config: { NO_SUCH_OPTION: 1 } });
 * } catch (err) {
 *   // a ConfigError carries this status but is not a NoElementError: compare the code
 *   if ((err as UcxError).code === 'UCS_ERR_NO_ELEM') console.error((err as Error).message);
 * }
 * ```
 */
export const NoElementError = statusClass(UCS_ERR_NO_ELEM, 'NoElementError');
/**
 * Some of the connections failed: `UCS_ERR_SOME_CONNECTS_FAILED`.
 *
 * @example
 * ```ts
 * try {
 *   ep = await worker.connect(host, port);
 * } catch (err) {
 *   if (err instanceof SomeConnectsFailedError) console.warn(`some lanes to ${host} failed:`, err.message);
 * }
 * ```
 */
export const SomeConnectsFailedError = statusClass(UCS_ERR_SOME_CONNECTS_FAILED, 'SomeConnectsFailedError');
/**
 * No device is available for the operation: `UCS_ERR_NO_DEVICE`.
 *
 * @example
 * ```ts
 * let context: Context;
 * try {
 *   context = new Context({ config: { TLS: 'rc', NET_DEVICES: 'mlx5_0:1' } }); // RDMA only
 * } catch (err) {
 *   if (!(err instanceof NoDeviceError)) throw err;
 *   context = new Context({ config: { TLS: 'tcp' } });                     // no such device here
 * }
 * ```
 */
export const NoDeviceError = statusClass(UCS_ERR_NO_DEVICE, 'NoDeviceError');
/**
 * The resource is busy: `UCS_ERR_BUSY`.
 *
 * @example
 * ```ts
 * try {
 *   await ep.flush();
 * } catch (err) {
 *   if (err instanceof BusyError) setTimeout(() => ep.flush(), 100); // busy now: retry later
 * }
 * ```
 */
export const BusyError = statusClass(UCS_ERR_BUSY, 'BusyError');
/**
 * The operation was cancelled (`cancel()`, an `AbortSignal`, or its endpoint or worker closed): `UCS_ERR_CANCELED`.
 *
 * @example
 * ```ts
 * try {
 *   await worker.tagRecv(buffer, 1n, undefined, { signal: AbortSignal.timeout(1000) });
 * } catch (err) {
 *   if (err instanceof CanceledError) console.log('no message within 1 s');
 * }
 * ```
 */
export const CanceledError = statusClass(UCS_ERR_CANCELED, 'CanceledError');
/**
 * A shared-memory segment could not be used: `UCS_ERR_SHMEM_SEGMENT`.
 *
 * @example
 * ```ts
 * let region: MemoryHandle;
 * try {
 *   region = context.createMemoryHandle(size);                      // UCX-allocated: shared memory
 * } catch (err) {
 *   if (!(err instanceof ShmemSegmentError)) throw err;
 *   region = context.createMemoryHandle(size, Buffer.alloc(size));  // registered memory instead
 * }
 * ```
 */
export const ShmemSegmentError = statusClass(UCS_ERR_SHMEM_SEGMENT, 'ShmemSegmentError');
/**
 * The object already exists: `UCS_ERR_ALREADY_EXISTS`.
 *
 * @example
 * ```ts
 * worker.registerAmReceiverCallback({ owner: 'app', id: 1n }, onMessage);
 * try {
 *   worker.registerAmReceiverCallback({ owner: 'app', id: 1n }, other);
 * } catch (err) {
 *   if (err instanceof AlreadyExistsError) console.log(err.code); // 'UCS_ERR_ALREADY_EXISTS'
 * }
 * ```
 */
export const AlreadyExistsError = statusClass(UCS_ERR_ALREADY_EXISTS, 'AlreadyExistsError');
/**
 * A value is out of range: `UCS_ERR_OUT_OF_RANGE`.
 *
 * @example
 * ```ts
 * try {
 *   await ep.atomic('add', key, offset, 1n);
 * } catch (err) {
 *   if (err instanceof ArgumentOutOfRangeError) throw err; // ucxx-ts refused it before UCX saw it
 *   if (err instanceof OutOfRangeError) console.error('UCX itself said UCS_ERR_OUT_OF_RANGE');
 * }
 * ```
 */
export const OutOfRangeError = statusClass(UCS_ERR_OUT_OF_RANGE, 'OutOfRangeError');
/**
 * The operation did not finish in time: `UCS_ERR_TIMED_OUT`.
 *
 * @example
 * ```ts
 * const request = ep.tagSendSync(data, 1n);
 * try {
 *   worker.progressUntil(request, 100); // at most 100 ms of blocking progress
 * } catch (err) {
 *   if (err instanceof TimedOutError) request.cancel();
 * }
 * ```
 */
export const TimedOutError = statusClass(UCS_ERR_TIMED_OUT, 'TimedOutError');
/**
 * A limit was exceeded: `UCS_ERR_EXCEEDS_LIMIT`.
 *
 * @example
 * ```ts
 * try {
 *   await ep.amSend(1, header, data);
 * } catch (err) {
 *   if ((err as UcxError).code === 'UCS_ERR_EXCEEDS_LIMIT') console.error('over a UCX limit:', (err as Error).message);
 * }
 * ```
 */
export const ExceedsLimitError = statusClass(UCS_ERR_EXCEEDS_LIMIT, 'ExceedsLimitError');
/**
 * The operation is not supported here: `UCS_ERR_UNSUPPORTED`.
 *
 * @example
 * ```ts
 * try {
 *   // announce CUDA memory (type 1) to a ucxx-ts receiver, which has host memory only
 *   await ep.amSend(data, { memoryType: 1, memoryTypePolicy: 'errorOnUnsupported', protocol: 'rendezvous' });
 * } catch (err) {
 *   if (err instanceof UnsupportedError) console.warn('the receiver cannot take that memory type');
 * }
 * ```
 */
export const UnsupportedError = statusClass(UCS_ERR_UNSUPPORTED, 'UnsupportedError');
/**
 * The peer rejected the operation (for example a connection or an active message): `UCS_ERR_REJECTED`.
 *
 * @example
 * ```ts
 * try {
 *   await ep.amSend(1, null, bigPayload, { protocol: 'rendezvous' });
 * } catch (err) {
 *   if (err instanceof RejectedError) console.warn('the receiver declined it (msg.reject())');
 * }
 * ```
 */
export const RejectedError = statusClass(UCS_ERR_REJECTED, 'RejectedError');
/**
 * There is no connection (a refused connect is the subclass ConnectionRefusedError): `UCS_ERR_NOT_CONNECTED`.
 *
 * @example
 * ```ts
 * try {
 *   ep = await worker.connect(host, port);
 * } catch (err) {
 *   if (err instanceof ConnectionRefusedError) console.log('nobody listens there'); // check the subclass first
 *   else if (err instanceof NotConnectedError) console.log('not connected:', err.message);
 * }
 * ```
 */
export const NotConnectedError = statusClass(UCS_ERR_NOT_CONNECTED, 'NotConnectedError');
/**
 * The peer's connection closed while something waited on it: `UCS_ERR_CONNECTION_RESET`.
 *
 * @example
 * ```ts
 * try {
 *   await ep.tagSendSync(data, 1n);
 * } catch (err) {
 *   if (err instanceof ConnectionResetError) console.warn(`${ep.peer} went away before receiving it`);
 * }
 * ```
 */
export const ConnectionResetError = statusClass(UCS_ERR_CONNECTION_RESET, 'ConnectionResetError');
/**
 * The peer stopped answering (UCX's timers, or `failureTimeout`): `UCS_ERR_ENDPOINT_TIMEOUT`.
 *
 * @example
 * ```ts
 * const context = new Context({ failureTimeout: 2000 });
 * // ...
 * try {
 *   await ep.memGet(buffer, key, 0);
 * } catch (err) {
 *   if (err instanceof EndpointTimeoutError) console.warn('the peer has not answered for 2 s');
 * }
 * ```
 */
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



/**
 * The error for a UCS status: the subclass for that status, or a plain UcxError.
 *
 * @example
 * ```ts
 * const err = errorFromStatus(-16, 'my operation'); // 'my operation: UCS_ERR_CANCELED (-16)'
 * err instanceof CanceledError;                     // true: the status's own class
 * errorFromStatus(-42) instanceof UcxError;         // true: a plain UcxError where no class is defined
 * ```
 */
export function errorFromStatus(status: number, message?: string): UcxError {
  if (typeof status !== 'number') throw new InvalidArgumentError(`status must be a number (a ucs_status_t), got ${show(status)}`);
  const cls = BY_STATUS.get(status);
  return cls === undefined ? new UcxError(status, message) : new cls(message);
}

/**
 * Throws the error for `status` unless it is UCS_OK.
 *
 * @example
 * ```ts
 * check(0, 'ucp_worker_fence');  // UCS_OK: nothing happens
 * check(-3, 'my_ucp_call');      // throws an IoError: 'my_ucp_call: UCS_ERR_IO_ERROR (-3)'
 * ```
 */
export function check(status: number, what: string): void {
  if (typeof status !== 'number') throw new InvalidArgumentError(`status must be a number (a ucs_status_t), got ${show(status)}`);
  if (status !== 0) throw errorFromStatus(status, what);
}

/**
 * `worker.connect()` was refused: nobody listens at the address, or (its message says which, where
 * the host is this one) a listener there refused the connection (UCX reports UCS_ERR_NOT_CONNECTED
 * for a refused TCP connection and for a server that refuses the client's error-handling mode, or
 * UCS_ERR_REJECTED when the listener rejects it). A NotConnectedError (status -24) whatever UCX
 * said, with UCX's own status in `ucxStatus`.
 *
 * @example
 * ```ts
 * try {
 *   ep = await worker.connect('127.0.0.1', 13337);
 * } catch (err) {
 *   if (!(err instanceof ConnectionRefusedError)) throw err;
 *   console.log(`nobody listens at ${err.address} yet`); // err.code is 'UCS_ERR_NOT_CONNECTED'
 * }
 * ```
 */
export class ConnectionRefusedError extends NotConnectedError {
  /** The status UCX reported. */
  readonly ucxStatus: number;
  /** Where the connection was refused. */
  readonly address: string;
  /** `listening`: a listener was seen on the port (this host), so it refused; else nobody listens. */
  constructor(address: string, ucxStatus: number, options?: ErrorOptions & { listening?: boolean }) {
    super(options?.listening === true
      ? `connect to ${address}: the listener there refused the connection (UCX said ${statusName(ucxStatus)})` +
        (statusName(ucxStatus) === 'UCS_ERR_REJECTED'
          ? ': the server rejected it, by its own choice (a ucxx-ts listener\'s accept callback, ucp_listener_reject) or for a reason of UCX\'s'
          : '')
      : `connect to ${address}: nobody listens there (connection refused; UCX said ${statusName(ucxStatus)})`, options);
    this.name = 'ConnectionRefusedError';
    this.ucxStatus = ucxStatus;
    this.address = address;
  }
}

/**
 * A listener could not accept a connection: UCX refused the client's connection request while creating
 * its endpoint (the client gets a ConnectionRefusedError). A client on another UCX release fails this
 * way: UCX 1.13 reads a 1.20 client's request as invalid (`ucxStatus` UCS_ERR_INVALID_PARAM), and 1.20
 * finds no lane to a 1.13 client (UCS_ERR_UNREACHABLE). A UcxError with status UCS_ERR_REJECTED
 * whatever UCX said, which stays in `ucxStatus`. Emitted as the listener's 'connectionError' event.
 *
 * @example
 * ```ts
 * const listener = worker.listen({ port: 13337 }, serve);
 * listener.on('connectionError', (err) => console.warn(`${err.client ?? 'a client'}: ${err.message}`));
 * ```
 */
export class ConnectionAcceptError extends UcxError {
  /** The status ucp_ep_create reported for the connection request. */
  readonly ucxStatus: number;
  /** The client's address as 'host:port', or null when UCX could not tell it. */
  readonly client: string | null;
  /**
   * `clientRelease`: the client's UCX release ('1.13') when the client told it (a ucxx-ts client), and
   * the listener refused it for that.
   */
  constructor(listener: string, client: string | null, ucxStatus: number, ucxVersion: string, clientRelease?: string) {
    super(UCS_ERR_REJECTED, clientRelease !== undefined
      ? `listener ${listener} refused the connection from ${client ?? 'a client'}: that ucxx-ts client runs UCX ` +
        `${clientRelease}, this process runs UCX ${ucxVersion}, and both peers must run the same UCX release range`
      : `listener ${listener} could not accept the connection from ${client ?? 'a client'} (UCX said ` +
        `${statusName(ucxStatus)}). A client on another UCX release is refused this way: this process runs UCX ` +
        `${ucxVersion}, and both peers must run the same UCX release range`);
    this.name = 'ConnectionAcceptError';
    this.ucxStatus = ucxStatus;
    this.client = client;
  }
}

/**
 * An object was used after `close()` (or after its parent closed).
 *
 * @example
 * ```ts
 * await ep.close();
 * try {
 *   await ep.tagSend(data, 1n); // the Request has failed at once: operations reject, they never throw
 * } catch (err) {
 *   if (err instanceof ClosedError) console.log(err.code, err.cause); // 'UCXX_ERR_CLOSED', the peer's failure if any
 * }
 * ```
 */
export class ClosedError extends Error {
  /** @internal Marks it as ucxx-ts's (errors/brand.ts). */
  readonly [UCXX_TS_ERROR] = true;
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
 *
 * @example
 * ```ts
 * // the owner exported the region with context.createMemoryHandle(size, buffer, { access: 'read' })
 * const key = createRemoteKeyFromSerialized(ep, keyBytes);
 * try {
 *   await ep.memPut(data, key, 0);
 * } catch (err) {
 *   if (err instanceof RemoteAccessError) await ep.memGet(data, key, 0); // reads are allowed
 * }
 * ```
 */
export class RemoteAccessError extends Error {
  /** @internal Marks it as ucxx-ts's (errors/brand.ts). */
  readonly [UCXX_TS_ERROR] = true;
  /** Always 'RemoteAccessError'. */
  override readonly name = 'RemoteAccessError';
  /** Always 'UCXX_ERR_REMOTE_ACCESS'. */
  readonly code = 'UCXX_ERR_REMOTE_ACCESS';
}

/**
 * An option given to ucp_config_modify that this UCX does not know, or a value it refuses.
 *
 * @example
 * ```ts
 * try {
 *   new Context({ config: { TSL: 'tcp' } }); // a typo for TLS
 * } catch (err) {
 *   if (err instanceof ConfigError) console.error(`UCX has no option ${err.option}`);
 * }
 * ```
 */
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
