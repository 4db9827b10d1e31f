/**
 * `NODE_DEBUG=ucxx`: lifecycle logging through Node's `util.debuglog` (lines on stderr, prefixed
 * `UCXX <pid>:`). Contexts, workers, listeners and endpoints log their creation, failure and close;
 * nothing on the data path logs, so leaving it on costs nothing per operation.
 *
 * ```sh
 * NODE_DEBUG=ucxx node app.js
 * # UCXX 4242: endpoint #3 to 127.0.0.1:13337 created (error handling peer)
 * ```
 */
import { debuglog } from 'node:util';

/** Logs `format` with `util.format` arguments when NODE_DEBUG names ucxx; a no-op call otherwise. */
export const debug = debuglog('ucxx');
