import type { ReadFallback } from '../client/rpc-client-options.js';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { BrokerConnectionObserver } from '../amqp/broker-connection.js';
import { BrokerMetrics } from '../observability/broker-metrics.js';
import type { GatewayObserver } from './gateway-server.js';

/** The gateway's Prometheus metrics, on a registry of its own like the worker's. */
export class GatewayMetrics implements GatewayObserver {
  readonly registry = new Registry();
  readonly #requests: Counter<'route' | 'method' | 'status'>;
  readonly #duration: Histogram<'route'>;
  readonly #rateLimited: Counter;
  readonly #overloaded: Counter;
  readonly #readFallbacks: Counter<'reason'>;
  readonly #broker: BrokerMetrics;
  #inFlight = 0;

  constructor(options: { readonly processMetrics?: boolean } = {}) {
    const registers = [this.registry];
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    this.#requests = new Counter({
      name: 'push_gateway_http_requests_total',
      help: 'HTTP requests answered, by route pattern, method and status.',
      labelNames: ['route', 'method', 'status'],
      registers,
    });
    this.#duration = new Histogram({
      name: 'push_gateway_http_request_duration_seconds',
      help: 'Time from receiving a request to the end of its response, by route pattern.',
      labelNames: ['route'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.#rateLimited = new Counter({
      name: 'push_gateway_rate_limited_total',
      help: 'Writes refused with 429 M_LIMIT_EXCEEDED by the per-user rate limit.',
      registers,
    });
    this.#overloaded = new Counter({
      name: 'push_gateway_overloaded_total',
      help: 'Requests refused with 503 because http.maxInFlight requests were in flight.',
      registers,
    });
    this.#readFallbacks = new Counter({
      name: 'push_gateway_read_fallbacks_total',
      help: 'Reads sent to the request queue instead of the read queue: returned by it, or no worker consuming it.',
      labelNames: ['reason'],
      registers,
    });
    this.#broker = new BrokerMetrics('push_gateway', this.registry);
    const inFlight = () => this.#inFlight;
    new Gauge({
      name: 'push_gateway_http_requests_in_flight',
      help: 'HTTP requests the gateway is working on: admitted, and not yet answered or still with the workers.',
      registers,
      collect() {
        this.set(inFlight());
      },
    });
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  inFlightChanged(count: number): void {
    this.#inFlight = count;
  }

  requestDone(route: string, method: string, status: number, seconds: number): void {
    this.#requests.inc({ route, method, status: String(status) });
    this.#duration.observe({ route }, seconds);
  }

  rateLimited(): void {
    this.#rateLimited.inc();
  }

  overloaded(): void {
    this.#overloaded.inc();
  }

  readFallback(reason: ReadFallback): void {
    this.#readFallbacks.inc({ reason });
  }

  /** For `PushRulesClient`'s `observer`: which broker node the gateway is on. */
  readonly broker: BrokerConnectionObserver = {
    connected: (address) => {
      this.#broker.connected(address.label);
    },
    lost: (address) => {
      this.#broker.lost(address.label);
    },
  };
}
