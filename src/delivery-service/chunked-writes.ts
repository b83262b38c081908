import { WeightedBudget } from '../service/weighted-budget.js';

/** How the journal stores the requests still waiting (delivery-journal.ts). */
export interface ChunkedWriteBounds {
  /** Requests in one write (≥ 1). */
  readonly chunk: number;
  /** Writes in flight at once, every partition of the worker together (≥ 1). */
  readonly inFlight: number;
}

/**
 * 500 requests a write (about 0.3 MB of BSON at the bench's bodies), two at
 * a time. A write holds its requests twice until the database answers:
 * as documents, their bodies encoded, and as the driver's serialized
 * command. When a gateway is down every partition's waiting requests come
 * due together (a catching-up intake: 20 per device), and one write per
 * partition, all at once, held tens of MB (the outage bench's last jump in
 * RSS). The database is the bottleneck either way, so taking turns costs
 * little time; the parts stay unacknowledged meanwhile, which is safe.
 */
export const DEFAULT_CHUNKED_WRITE_BOUNDS: ChunkedWriteBounds = { chunk: 500, inFlight: 2 };

/** Writes lists in chunks, taking turns with every other list written through it. */
export class ChunkedWrites {
  readonly #turns: WeightedBudget;
  readonly #chunk: number;

  constructor(bounds: ChunkedWriteBounds = DEFAULT_CHUNKED_WRITE_BOUNDS) {
    if (!Number.isInteger(bounds.chunk) || bounds.chunk < 1) throw new RangeError('chunk must be an integer ≥ 1');
    if (!Number.isInteger(bounds.inFlight) || bounds.inFlight < 1)
      throw new RangeError('inFlight must be an integer ≥ 1');
    this.#turns = new WeightedBudget(bounds.inFlight);
    this.#chunk = bounds.chunk;
  }

  /**
   * Writes `items` in order, a chunk at a time, each once it has its turn
   * and `mayWrite()` still says yes (asked right before the chunk starts:
   * its turn may have come late). Resolves with how many were written: all
   * of them, or the chunks written before `mayWrite()` said no. A chunk
   * that fails rejects at once; the chunks before it were written.
   */
  async write<T>(
    items: readonly T[],
    write: (chunk: readonly T[]) => Promise<void>,
    mayWrite: () => boolean,
  ): Promise<number> {
    let written = 0;
    while (written < items.length) {
      const chunk = items.slice(written, written + this.#chunk);
      const wrote = await this.#turns.run(1, async () => {
        if (!mayWrite()) return false;
        await write(chunk);
        return true;
      });
      if (!wrote) return written;
      written += chunk.length;
    }
    return written;
  }
}
