/**
 * What `worker.connect()` decides and says around UCX: the error-handling mode of a new endpoint, and
 * what a failed connect most likely means, in the error the user gets (refused, unreachable, reset by a
 * server that refuses this client's mode, or never answered).
 */
import {
  UCS_ERR_CONNECTION_RESET, UCS_ERR_ENDPOINT_TIMEOUT, UCS_ERR_UNREACHABLE, ucpVersion, ucxProfile,
} from '../ffi/index.js';
import { ConnectionRefusedError } from '../errors/index.js';
import { InvalidArgumentError } from '../errors/misuse.js';
import { show } from '../internal/bytes.js';
import { featureMismatchHint } from '../internal/hints.js';
import { isLocalIp } from '../internal/peer-locality.js';
import { listeningOnPort } from '../internal/port-sockets.js';
import { kByWatchdog } from '../internal/symbols.js';
import type { ErrorHandlingMode } from '../endpoint.js';

/**
 * The UCP error mode for an endpoint a worker creates ('auto': the loaded UCX version's default);
 * `local` says whether the peer is on this host.
 */
export function resolveErrorMode(option: ErrorHandlingMode | boolean | undefined, local: () => boolean): 'peer' | 'none' {
  switch (option ?? 'auto') {
    case true:
    case 'peer':
      return 'peer';
    case false:
    case 'none':
      return 'none';
    case 'auto':
      return ucxProfile().defaultErrorMode === 'peer' || !local() ? 'peer' : 'none';
    default:
      throw new InvalidArgumentError(`errorHandling must be 'auto', 'peer', 'none' or a boolean, got ${show(option)}`);
  }
}

/** What a failed connect most likely needs from the user, for the error message ('' when nothing known). */
function connectFailureHint(err: Error, mode: 'peer' | 'none', features: readonly string[]): string {
  if ((err as { status?: number }).status === UCS_ERR_UNREACHABLE) {
    // An endpoint that failed this way after its flush already carries the hint.
    return err.message.includes('features differ') ? '' : featureMismatchHint(features);
  }
  return modeHint(mode);
}

/** The advice for a server that refuses this client's error-handling mode. */
function modeHint(mode: 'peer' | 'none'): string {
  const other = mode === 'peer' ? 'none' : 'peer';
  return `. The connection used errorHandling '${mode}'; a server that asks for '${other}' (one that accepts ` +
    `with UCP_ERR_HANDLING_MODE_${other.toUpperCase()}) refuses it: connect with { errorHandling: '${other}' } to reach one`;
}

/** A connect that failed, as `explainConnectFailure` needs it. */
export interface FailedConnect {
  readonly host: string;
  readonly port: number;
  /** The address the host resolved to. */
  readonly ip: string;
  readonly mode: 'peer' | 'none';
  /** A listener was seen on the port (this host) before connecting. */
  readonly listenedBefore: boolean;
  /** The context's features (a feature mismatch is one reason for UNREACHABLE). */
  readonly features: readonly string[];
  /** UCX refused the connection (NOT_CONNECTED, REJECTED, or INVALID_PARAM from 1.13 reading a newer reply). */
  readonly refused: boolean;
}

/** The error a failed connect rejects with: a ConnectionRefusedError, or `err` with what it likely means. */
export function explainConnectFailure(err: unknown, failed: FailedConnect): unknown {
  const { host, port, ip, mode, listenedBefore, features } = failed;
  const status = (err as { status?: number }).status;
  if (failed.refused) {
    // UCX reports nobody listening and a server refusing this client's mode alike; on this host /proc
    // tells them apart, and only the second one gets the hint.
    const listening = listenedBefore ? true : isLocalIp(ip) ? listeningOnPort(port) : null;
    const refused = new ConnectionRefusedError(`${host}:${port}`, status as number, { cause: err, listening: listening === true });
    if (listening !== false) {
      refused.message += connectFailureHint(refused, mode, features);
      // UCX tells the client nothing more when the server's UCX could not read its request.
      refused.message += `. A listener on another UCX release refuses a client this way too: this process runs UCX ` +
        `${ucpVersion().join('.')}, and both peers must run the same UCX release range`;
    }
    return refused;
  }
  if (!(err instanceof Error)) return err;
  if (status === UCS_ERR_UNREACHABLE) {
    err.message += connectFailureHint(err, mode, features);
    // UCX 1.20 reports a server that refused this client's mode and exited as UNREACHABLE too.
    if (listenedBefore) err.message += modeHint(mode);
  }
  // A server that refuses this client's error mode and then exits (or closes its listener) resets the
  // connection instead of refusing it (UCX 1.20), or UCX times the endpoint out (1.13).
  if ((err as { [kByWatchdog]?: boolean })[kByWatchdog] === true) {
    err.message += '. Something accepted the TCP connection and never answered (a stopped server, or not a UCX listener)';
  } else if ((status === UCS_ERR_CONNECTION_RESET || status === UCS_ERR_ENDPOINT_TIMEOUT) && listenedBefore) {
    err.message += '. The server ended the connection before it was made' + connectFailureHint(err, mode, features);
  }
  return err;
}
