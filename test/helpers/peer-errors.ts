/**
 * Imported first by every peer that talks to its test over IPC: an uncaught exception or unhandled
 * rejection in the peer is sent to the test as `{ type: 'error', message, stack }` (Peer.next() then
 * rejects at once with it, instead of waiting out its timeout), written to stderr, and ends the peer
 * with status 1.
 */
function report(kind: string, reason: unknown): void {
  const error = reason instanceof Error ? reason : new Error(String(reason));
  const message = { type: 'error', message: `${kind} in peer ${process.argv[1] ?? '?'}: ${String(error)}`, stack: error.stack ?? '' };
  process.stderr.write(`${message.message}\n${message.stack}\n`);
  // Exit once the message is out; at the latest after a second (a broken channel never calls back).
  setTimeout(() => process.exit(1), 1000);
  if (process.send !== undefined && process.connected) process.send(message, undefined, {}, () => process.exit(1));
  else process.exit(1);
}

// The test that started this peer is gone (its process ended, or closed the channel): so is the peer,
// whatever it was waiting for.
process.once('disconnect', () => process.exit(process.exitCode ?? 0));

process.on('uncaughtException', (err) => report('uncaught exception', err));
process.on('unhandledRejection', (reason) => report('unhandled rejection', reason));

export {};
