/**
 * How often the event loop got a turn while `work` ran: a setImmediate ticker runs beside it. The
 * tests of code that yields to the loop (a scrape, a worker's metrics in parts) count on it.
 */
export async function turnsDuring<T>(work: () => Promise<T>): Promise<{ turns: number; result: T }> {
  let turns = 0;
  let done = false;
  const tick = (): void => {
    turns++;
    if (!done) setImmediate(tick);
  };
  setImmediate(tick);
  try {
    const result = await work();
    return { turns, result };
  } finally {
    done = true;
  }
}
