/** What a user most likely has to set when UCX reports a given failure: appended to error messages. */
import { ucxProfile } from '../ffi/index.js';

/**
 * UCX 1.13 cannot wire up a PEER-mode endpoint between contexts whose features differ (UNREACHABLE):
 * the fix, where the loaded UCX has that bug (UcxProfile.unavoidableBugs), else nothing.
 */
export function featureMismatchHint(features: readonly string[]): string {
  if (!ucxProfile().unavoidableBugs.featureMismatchUnreachable) return '';
  return `. UCX 1.13 cannot wire up an endpoint between contexts whose features differ (this context has ` +
    `${features.join(', ')}): create the Context with the peer's features, e.g. ` +
    `new Context({ features: ['stream', 'wakeup'] }) for a stream-only peer`;
}
