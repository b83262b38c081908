import { Gauge, type Registry } from 'prom-client';

/** One queue's counts, as the broker gives them on a passive declare. */
export interface QueueCounts {
  /** Messages ready for delivery (those delivered and not yet acknowledged are not counted). */
  readonly messageCount: number;
  readonly consumerCount: number;
}

/** What the gauges need of the broker: one queue's counts, by name; rejects when it cannot tell. */
export interface QueueProbe {
  check(queue: string): Promise<QueueCounts>;
}

export interface QueueDepthOptions {
  /** The queues to count, by the label metrics give them (`request`, `read`, `evaluate`, `dead-letter`) → their names. */
  readonly queues: Readonly<Record<string, string>>;
  readonly probe: QueueProbe;
  /** The longest a scrape waits for the counts (default 2 000 ms). */
  readonly timeoutMs?: number;
}

/**
 * How much waits in each queue, for the dashboard and the backlog alert:
 * `<prefix>_queue_messages_ready{queue}` and
 * `<prefix>_queue_consumers{queue}` (consumers as the broker counts them:
 * every worker of the pool, not only this one).
 *
 * Counted when scraped (one passive declare per queue, no timer). A queue
 * that could not be counted within `timeoutMs` (no broker, the queue not
 * declared) has no sample in that scrape rather than an old one. Every
 * worker reports the same queues: aggregate with `max`, not `sum`.
 */
export class QueueDepthMetrics {
  readonly #options: QueueDepthOptions;
  #counting: Promise<ReadonlyMap<string, QueueCounts>> | undefined;
  #stillCounting = false;

  constructor(prefix: string, registry: Registry, options: QueueDepthOptions) {
    this.#options = options;
    const roles = Object.keys(options.queues);
    // Both gauges are collected in the same scrape: they share one count.
    const counts = async () => (this.#counting ??= this.#count().finally(() => (this.#counting = undefined)));
    const gauge = (name: string, help: string, read: (counts: QueueCounts) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ['queue'],
        registers: [registry],
        async collect() {
          const counted = await counts();
          for (const queue of roles) {
            const found = counted.get(queue);
            if (found === undefined) this.remove({ queue });
            else this.set({ queue }, read(found));
          }
        },
      });
    gauge(
      `${prefix}_queue_messages_ready`,
      'Messages ready in each queue (request, read, evaluate, dead-letter), as the broker counts them when scraped.',
      (c) => c.messageCount,
    );
    gauge(
      `${prefix}_queue_consumers`,
      'Consumers of each queue (request, read, evaluate, dead-letter) across the pool, as the broker counts them when scraped.',
      (c) => c.consumerCount,
    );
  }

  async #count(): Promise<ReadonlyMap<string, QueueCounts>> {
    // A count that outlived its scrape's wait is not started again on top of it.
    if (this.#stillCounting) return new Map();
    const { queues, probe, timeoutMs = 2_000 } = this.#options;
    const counted = new Map<string, QueueCounts>();
    this.#stillCounting = true;
    // One after the other: a queue that is not there closes the probe's channel.
    const all = (async () => {
      for (const [role, name] of Object.entries(queues)) {
        try {
          counted.set(role, await probe.check(name));
        } catch {
          // Not counted: no sample for it in this scrape.
        }
      }
    })();
    void all.finally(() => (this.#stillCounting = false));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
    // A copy: what comes in after the wait is not reported.
    return new Map(counted);
  }
}
