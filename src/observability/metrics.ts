import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { EvaluateObserver } from '../consumer/evaluate-queue.js';
import type { EvaluatedOn, EvaluatedOnObserver } from '../consumer/split-evaluate-runner.js';
import { BrokerMetrics } from './broker-metrics.js';
import type { RequestReport, WorkerObserver } from '../consumer/worker-observer.js';
import type { AbandonReason, StoreBoundsObserver } from '../service/bounded-store.js';
import type { EvaluateStats } from '../service/evaluate-service.js';
import type { RulesetCache } from '../service/ruleset-cache.js';
import { registerCacheMetrics } from './cache-metrics.js';

/**
 * The worker's Prometheus metrics, on a registry of its own (not the
 * library's global one) so that tests and embedders get a clean set.
 */
export class WorkerMetrics implements WorkerObserver, EvaluateObserver, EvaluatedOnObserver, StoreBoundsObserver {
  readonly registry = new Registry();
  readonly #requests: Counter<'op' | 'outcome' | 'queue'>;
  readonly #duration: Histogram<'op'>;
  readonly #conflicts: Counter;
  readonly #retries: Counter;
  readonly #redeliveries: Counter;
  readonly #replays: Counter;
  readonly #unchanged: Counter;
  readonly #reconnects: Counter<'session'>;
  readonly #session: string;
  readonly #deadlinePassed: Counter<'op' | 'queue'>;
  readonly #abandoned: Counter<'operation' | 'reason'>;
  readonly #recipients: Counter;
  readonly #notified: Counter;
  readonly #storeQueries: Counter;
  readonly #cacheHits: Counter;
  readonly #loaded: Counter;
  readonly #evaluatedOn: Counter<'on'>;
  readonly #broker: BrokerMetrics;

  /** `inFlight` is read at scrape time, so the gauge never drifts. */
  constructor(
    inFlight: () => number,
    options: {
      readonly processMetrics?: boolean;
      readonly cache?: Pick<RulesetCache<unknown>, 'size' | 'bytes' | 'stats'>;
      /** The queues a worker consumes (by role: `request`, `read`, …), and the ones it is consuming now. */
      readonly queues?: { readonly all: readonly string[]; readonly consumed: () => readonly string[] };
      /** The worker's roles (`worker.roles`): which it runs, which not. */
      readonly roles?: Readonly<Record<string, boolean>>;
      /** Which of the worker's broker sessions these metrics count: `requests` (the main thread's) or `delivery`. */
      readonly session?: 'requests' | 'delivery';
    } = {},
  ) {
    const registers = [this.registry];
    this.#session = options.session ?? 'requests';
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    this.#requests = new Counter({
      name: 'push_worker_requests_total',
      help: 'Requests settled, by op, outcome (ok, an error kind, expired, dead-lettered) and queue (request, read, evaluate).',
      labelNames: ['op', 'outcome', 'queue'],
      registers,
    });
    this.#duration = new Histogram({
      name: 'push_worker_request_duration_seconds',
      help: 'Time from taking a request to acknowledging it, by op.',
      labelNames: ['op'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    new Gauge({
      name: 'push_worker_requests_in_flight',
      help: 'Requests taken and not yet acknowledged.',
      registers,
      collect() {
        this.set(inFlight());
      },
    });
    this.#conflicts = new Counter({
      name: 'push_worker_cas_conflicts_total',
      help: 'Compare-and-set writes that lost to another writer.',
      registers,
    });
    this.#retries = new Counter({
      name: 'push_worker_cas_retries_total',
      help: 'Writes attempted again after a compare-and-set conflict.',
      registers,
    });
    this.#redeliveries = new Counter({
      name: 'push_worker_redeliveries_total',
      help: 'Requests the broker delivered more than once.',
      registers,
    });
    this.#replays = new Counter({
      name: 'push_worker_replayed_writes_total',
      help: 'Writes whose messageId was already applied, answered from the record.',
      registers,
    });
    this.#unchanged = new Counter({
      name: 'push_worker_unchanged_writes_total',
      help: 'Writes that changed nothing: no version bump, no change event.',
      registers,
    });
    this.#reconnects = new Counter({
      name: 'push_worker_amqp_reconnects_total',
      help: 'Broker sessions re-established after a loss, by session (requests or delivery).',
      labelNames: ['session'],
      registers,
    });
    this.#broker = new BrokerMetrics('push_worker', this.registry, this.#session);
    const { queues } = options;
    if (queues !== undefined) {
      new Gauge({
        name: 'push_worker_queue_consuming',
        help: 'Whether the worker consumes each of its queues now (1) or not (0): request, read, evaluate, deliver (those of its roles).',
        labelNames: ['queue'],
        registers,
        collect() {
          const consumed = new Set(queues.consumed());
          for (const queue of queues.all) this.set({ queue }, consumed.has(queue) ? 1 : 0);
        },
      });
    }
    const { roles } = options;
    if (roles !== undefined) {
      const runs = new Gauge({
        name: 'push_worker_role',
        help: 'The roles this worker runs (1) and those it does not (0): rpc, read, evaluate, deliver (worker.roles).',
        labelNames: ['role'],
        registers,
      });
      for (const [role, on] of Object.entries(roles)) runs.set({ role }, on ? 1 : 0);
    }
    this.#deadlinePassed = new Counter({
      name: 'push_worker_deadline_passed_total',
      help: 'Requests answered Unavailable because their deadline came before the store had served them, by op and queue.',
      labelNames: ['op', 'queue'],
      registers,
    });
    this.#abandoned = new Counter({
      name: 'push_worker_store_operations_abandoned_total',
      help: "Store operations not started because their request's deadline had passed (not-started), given up at the deadline (deadline) or after mongodb.operationTimeoutMs (timeout).",
      labelNames: ['operation', 'reason'],
      registers,
    });
    this.#recipients = new Counter({
      name: 'push_worker_evaluate_recipients_total',
      help: 'Recipients named by evaluate requests.',
      registers,
    });
    this.#notified = new Counter({
      name: 'push_worker_evaluate_notified_total',
      help: 'Recipients an evaluation decided to notify.',
      registers,
    });
    this.#storeQueries = new Counter({
      name: 'push_worker_evaluate_store_queries_total',
      help: 'Bulk store reads of uncached recipients (one per chunk).',
      registers,
    });
    this.#cacheHits = new Counter({
      name: 'push_worker_evaluate_cache_hits_total',
      help: 'Recipients whose compiled rules came from the cache.',
      registers,
    });
    this.#loaded = new Counter({
      name: 'push_worker_evaluate_cache_misses_total',
      help: 'Recipients whose rules were read from the store (not cached, or cached too long ago).',
      registers,
    });
    this.#evaluatedOn = new Counter({
      name: 'push_worker_evaluations_total',
      help: 'Evaluate requests taken, by where they were evaluated: event_loop (small ones, or evaluate.threads 0) or thread.',
      labelNames: ['on'],
      registers,
    });
    if (options.cache !== undefined)
      registerCacheMetrics(this.registry, 'push_worker_evaluate_cache', options.cache, {
        entries: 'Users in the compiled-rules cache.',
        bytes: 'Estimated bytes of the compiled rules cached.',
        invalidations: 'Cache entries dropped by change events or a reset of the subscription.',
        staleRefreshes: 'Cached entries older than evaluate.maxStalenessMs, read again.',
        evictions: 'Cache entries evicted for the entry or byte bound.',
      });
  }

  evaluated(stats: EvaluateStats): void {
    this.#recipients.inc(stats.recipients);
    this.#notified.inc(stats.notified);
    this.#storeQueries.inc(stats.storeQueries);
    this.#cacheHits.inc(stats.cacheHits);
    this.#loaded.inc(stats.loaded);
  }

  evaluatedOn(where: EvaluatedOn): void {
    this.#evaluatedOn.inc({ on: where });
  }

  requestSettled(report: RequestReport): void {
    this.#requestsOf(report.op, report.outcome, report.queue).inc();
    this.#durationOf(report.op).observe(report.seconds);
    if (report.conflicts > 0) {
      this.#conflicts.inc(report.conflicts);
      // A request that spent its budget stopped after its last conflict.
      this.#retries.inc(report.outcome === 'Unavailable' ? report.conflicts - 1 : report.conflicts);
    }
    if (report.redelivered) this.#redeliveries.inc();
    if (report.replayed) this.#replays.inc();
    if (report.unchanged) this.#unchanged.inc();
    if (report.deadlinePassed) this.#deadlinePassed.inc({ op: report.op, queue: report.queue });
  }

  // The labelled children, kept: finding one from a label object hashes its
  // sorted labels on every request, a few microseconds of each read.
  readonly #requestChildren = new Map<string, Counter.Internal>();
  readonly #durationChildren = new Map<string, Histogram.Internal<'op'>>();

  #requestsOf(op: string, outcome: string, queue: string): Counter.Internal {
    const key = `${op}\n${outcome}\n${queue}`;
    let child = this.#requestChildren.get(key);
    if (child === undefined) {
      child = this.#requests.labels({ op, outcome, queue });
      this.#requestChildren.set(key, child);
    }
    return child;
  }

  #durationOf(op: string): Histogram.Internal<'op'> {
    let child = this.#durationChildren.get(op);
    if (child === undefined) {
      child = this.#duration.labels({ op });
      this.#durationChildren.set(op, child);
    }
    return child;
  }

  storeOperationAbandoned(operation: string, reason: AbandonReason): void {
    this.#abandoned.inc({ operation, reason });
  }

  reconnected(): void {
    this.#reconnects.inc({ session: this.#session });
  }

  brokerConnected(broker: string): void {
    this.#broker.connected(broker);
  }

  brokerLost(broker: string): void {
    this.#broker.lost(broker);
  }
}
