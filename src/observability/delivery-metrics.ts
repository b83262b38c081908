import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { HostLabels } from '../delivery/host-labels.js';
import type { DeliveryObserver, DeliveryOutcome } from '../delivery-service/delivery-observer.js';

/** What the delivery gauges read at scrape time (the scheduler). */
export interface DeliveryBacklog {
  readonly pending: number;
  oldestAcceptedAt(): number | undefined;
}

/** What the partition and pusher-cache gauges read at scrape time. */
export interface DeliveryShare {
  /** The partitions this worker delivers now. */
  readonly partitions: readonly number[];
  readonly pusherCache: {
    readonly hits: number;
    readonly misses: number;
    readonly size: number;
    readonly bytes: number;
  };
}

/** Distinct gateway hosts with a label of their own; the rest are `other` (host-labels.ts). */
const MAX_HOST_LABELS = 50;
/**
 * Pusher URLs whose host label is remembered, so that a request's three
 * observations parse its URL at most once. A URL's label never changes
 * (host-labels.ts keeps every label it gave), so entries need no age; when
 * full the memo starts again. URLs are at most 512 bytes (`set_pusher`).
 */
const URL_LABELS_KEPT = 256;

/** The series of one host label, each child looked up once (prom-client hashes a label object per call). */
interface HostSeries {
  readonly requests: ReadonlyMap<DeliveryOutcome, Counter.Internal>;
  readonly devices: ReadonlyMap<DeliveryOutcome, Counter.Internal>;
  readonly response: Histogram.Internal<'host'>;
  readonly breakerHeld: Counter.Internal;
}

/**
 * Push delivery's Prometheus metrics (docs/delivery.md#operating-it), on the
 * worker's registry. Labelled by gateway host, bounded; never by user or
 * pushkey.
 */
export class DeliveryMetrics implements DeliveryObserver {
  readonly #hosts = new HostLabels(MAX_HOST_LABELS);
  readonly #requests: Counter<'host' | 'outcome'>;
  readonly #devices: Counter<'host' | 'outcome'>;
  readonly #response: Histogram<'host'>;
  readonly #latency: Histogram;
  readonly #breakerHeld: Counter<'host'>;
  readonly #email: Counter;
  readonly #latencyChild: Histogram.Internal<never>;
  /** By host label: at most MAX_HOST_LABELS + 2 (`other`, `invalid`). */
  readonly #series = new Map<string, HostSeries>();
  readonly #urlLabels = new Map<string, string>();

  constructor(
    registry: Registry,
    backlog: () => DeliveryBacklog | undefined,
    now: () => number = Date.now,
    share: () => DeliveryShare | undefined = () => undefined,
  ) {
    const registers = [registry];
    this.#requests = new Counter({
      name: 'push_worker_delivery_requests_total',
      help: 'Gateway requests by host and outcome (delivered, retried, failed, refused, given_up, dropped, expired, pusher_removed).',
      labelNames: ['host', 'outcome'],
      registers,
    });
    this.#devices = new Counter({
      name: 'push_worker_delivery_devices_total',
      help: 'Devices by host and outcome (delivered, rejected, retried, failed, refused, given_up, dropped, expired, pusher_removed).',
      labelNames: ['host', 'outcome'],
      registers,
    });
    this.#response = new Histogram({
      name: 'push_worker_gateway_response_seconds',
      help: 'From sending a request to a push gateway to its answer (or a connection error or timeout), by host.',
      labelNames: ['host'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 60],
      registers,
    });
    this.#latency = new Histogram({
      name: 'push_worker_delivery_latency_seconds',
      help: 'From taking a notify message in to its delivery to the gateway, per request delivered.',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 86400],
      registers,
    });
    this.#breakerHeld = new Counter({
      name: 'push_worker_delivery_breaker_open_total',
      help: "Times a device's request waited because its gateway's circuit breaker was open, by host.",
      labelNames: ['host'],
      registers,
    });
    this.#email = new Counter({
      name: 'push_worker_delivery_email_pushers_skipped_total',
      help: 'E-mail pushers of pushed recipients: this service sends no mail.',
      registers,
    });
    new Gauge({
      name: 'push_worker_delivery_pending',
      help: 'Gateway requests this worker holds and has not finished (waiting, retrying or in flight).',
      registers,
      collect() {
        this.set(backlog()?.pending ?? 0);
      },
    });
    new Gauge({
      name: 'push_worker_delivery_oldest_pending_seconds',
      help: 'Age of the oldest gateway request this worker holds; 0 when it holds none.',
      registers,
      collect() {
        const oldest = backlog()?.oldestAcceptedAt();
        this.set(oldest === undefined ? 0 : Math.max(0, now() - oldest) / 1000);
      },
    });
    new Gauge({
      name: 'push_worker_delivery_partitions',
      help: 'Delivery partitions this worker holds and delivers now.',
      registers,
      collect() {
        this.set(share()?.partitions.length ?? 0);
      },
    });
    new Gauge({
      name: 'push_worker_delivery_pusher_cache',
      help: 'The pusher cache of delivery: users kept (size), their estimated bytes, and hits and misses so far.',
      labelNames: ['stat'],
      registers,
      collect() {
        const stats = share()?.pusherCache;
        for (const stat of ['size', 'bytes', 'hits', 'misses'] as const) this.set({ stat }, stats?.[stat] ?? 0);
      },
    });
    this.#latencyChild = this.#latency.labels();
    // Every outcome is exported from the start, so that rate() works from the first event.
    for (const outcome of OUTCOMES) this.#devices.inc({ host: 'none', outcome }, 0);
  }

  settled(url: string, outcome: DeliveryOutcome, devices: number): void {
    const series = this.#seriesOf(url);
    // A request's rejected devices are part of a delivered request: counted as devices, not as another request.
    if (outcome !== 'rejected') series.requests.get(outcome)?.inc();
    if (devices > 0) series.devices.get(outcome)?.inc(devices);
  }

  gatewayAnswered(url: string, seconds: number): void {
    this.#seriesOf(url).response.observe(seconds);
  }

  deliveredAfter(seconds: number): void {
    this.#latencyChild.observe(seconds);
  }

  heldByBreaker(url: string): void {
    this.#seriesOf(url).breakerHeld.inc();
  }

  #seriesOf(url: string): HostSeries {
    let host = this.#urlLabels.get(url);
    if (host === undefined) {
      if (this.#urlLabels.size >= URL_LABELS_KEPT) this.#urlLabels.clear();
      host = this.#hosts.labelOf(url);
      this.#urlLabels.set(url, host);
    }
    let series = this.#series.get(host);
    if (series === undefined) {
      const children = (counter: Counter<'host' | 'outcome'>) =>
        new Map(OUTCOMES.map((outcome) => [outcome, counter.labels({ host, outcome })]));
      series = {
        requests: children(this.#requests),
        devices: children(this.#devices),
        response: this.#response.labels({ host }),
        breakerHeld: this.#breakerHeld.labels({ host }),
      };
      this.#series.set(host, series);
    }
    return series;
  }

  emailPushersSkipped(count: number): void {
    this.#email.inc(count);
  }
}

const OUTCOMES: readonly DeliveryOutcome[] = [
  'delivered',
  'rejected',
  'retried',
  'failed',
  'refused',
  'given_up',
  'dropped',
  'expired',
  'pusher_removed',
];
