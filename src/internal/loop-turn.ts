/**
 * When the event loop last turned, as far as ucxx-ts saw (performance.now() ms): the progress engine
 * notes each of its polling slices, which start as a macrotask. Awaits of settled requests
 * (request.ts) yield to the event loop only when it has not turned for a while, so that a polling
 * engine, which turns it every slice anyway, never makes them wait for its next slice.
 */
let lastTurn = 0;

/** The event loop just turned (called from a macrotask). */
export function noteLoopTurn(now: number): void {
  lastTurn = now;
}

/** When it last turned (0: not seen yet). */
export function lastLoopTurn(): number {
  return lastTurn;
}
