import type { Context } from 'ucxx-ts';

/**
 * The context's md index -> transport component name, for tests that take packed keys apart. Context
 * keeps it internal (it is not in the typings): reached here by name, as only a test should.
 */
export function mdComponents(context: Context): Map<number, string> {
  return (context as unknown as { _mdComponents(): Map<number, string> })._mdComponents();
}
