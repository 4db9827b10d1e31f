/**
 * Test peer: makes UCX log a warning and an error (a Context asking for a transport that does not
 * exist), then prints one JSON line on stdout with the error it got and UCX_LOG_FILE as it was left.
 */
import { Context } from 'ucxx-ts';

let code: string | undefined;
try {
  new Context({ config: { TLS: 'no_such_transport' } });
} catch (err) {
  code = (err as { code?: string }).code;
}
console.log(JSON.stringify({ code, logFile: process.env['UCX_LOG_FILE'] }));
