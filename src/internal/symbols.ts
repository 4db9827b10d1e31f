/**
 * Module symbols for what the public classes share among themselves and with nothing else (as undici's
 * lib/core/symbols.js): a property under one of these is not part of the API, does not show in
 * completion, and is stripped from the emitted typings.
 */

/** `worker[kRequests]`: the worker's RequestEngine (parameter blocks, posting, operations in flight). */
export const kRequests: unique symbol = Symbol('ucxx-ts.requests');
