/** What a user most likely has to set when UCX reports a given failure: appended to error messages. */

/** UCX 1.13 cannot wire up a PEER-mode endpoint between contexts whose features differ (UNREACHABLE). */
export function featureMismatchHint(features: readonly string[]): string {
  return `. UCX 1.13 cannot wire up an endpoint between contexts whose features differ (this context has ` +
    `${features.join(', ')}): create the Context with the peer's features, e.g. ` +
    `new Context({ features: ['stream', 'wakeup'] }) for a stream-only peer`;
}
