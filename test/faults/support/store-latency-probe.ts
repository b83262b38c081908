import type { Db } from 'mongodb';

/** One probe write: when it started, and how long the store took to answer it. */
interface Probe {
  readonly at: number;
  readonly ms: number;
}

/**
 * A small write into the test's database every `everyMs` until stopped:
 * how long the store takes to answer one while the workers load it. A
 * worker's bookkeeping writes (deletions, progress marks) wait as long, so
 * what it sent in that time before a crash may not be confirmed in the
 * store: its next holder sends it again.
 */
export class StoreLatencyProbe {
  readonly #probes: Probe[] = [];
  #stopped = false;
  readonly #loop: Promise<void>;

  constructor(db: Db, everyMs = 100) {
    const collection = db.collection<{ _id: string; n: number }>('latency_probe');
    this.#loop = (async () => {
      while (!this.#stopped) {
        const at = Date.now();
        // A failed write (the test's world closing under a failed test) ends the probing; its wait counts.
        const failed = await collection.updateOne({ _id: 'probe' }, { $inc: { n: 1 } }, { upsert: true }).then(
          () => false,
          () => true,
        );
        this.#probes.push({ at, ms: Date.now() - at });
        if (failed) return;
        await new Promise((resolve) => setTimeout(resolve, everyMs));
      }
    })();
  }

  /** The slowest answer to a probe started within `ms` before `until` (0 when none was). */
  slowestWithin(until: number, ms: number): number {
    let slowest = 0;
    for (const probe of this.#probes)
      if (probe.at >= until - ms && probe.at <= until) slowest = Math.max(slowest, probe.ms);
    return slowest;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
  }
}
