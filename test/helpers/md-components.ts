import type { Context } from 'ucxx-ts';

/** The context's md index -> transport component name, for tests that take packed keys apart. */
export function mdComponents(context: Context): Map<number, string> {
  return new Map(context.getResources().map((resource) => [resource.md, resource.component]));
}
