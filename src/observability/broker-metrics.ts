import { Counter, Gauge, type Registry } from 'prom-client';

/**
 * Which broker node a process is connected to, for the worker's and the
 * gateway's `/metrics`: `<prefix>_amqp_connected{broker="host:port"}` is 1
 * for the node of the live connection and 0 for the nodes it was on before;
 * `<prefix>_amqp_connection_losses_total{broker}` counts the losses per node.
 *
 * A worker holds two broker sessions (the request path's and the delivery
 * thread's), each free to end on its own node after a failover; its
 * `/metrics` merges both threads' registries, so a worker's families carry
 * `session` too, and neither session's state hides the other's.
 */
export class BrokerMetrics {
  readonly #connected: Gauge;
  readonly #losses: Counter;
  readonly #session: { readonly session: string } | Record<string, never>;

  constructor(prefix: string, registry: Registry, session?: string) {
    const registers = [registry];
    const labelNames = session === undefined ? ['broker'] : ['broker', 'session'];
    this.#session = session === undefined ? {} : { session };
    this.#connected = new Gauge({
      name: `${prefix}_amqp_connected`,
      help:
        session === undefined
          ? 'The broker node of the live connection (1); nodes connected to before and lost (0). Label broker: host:port.'
          : 'The broker node of the live connection, per session (1); nodes the session was connected to before and lost (0). Labels broker: host:port; session: requests or delivery.',
      labelNames,
      registers,
    });
    this.#losses = new Counter({
      name: `${prefix}_amqp_connection_losses_total`,
      help:
        session === undefined
          ? 'Broker connections lost, by node (host:port).'
          : 'Broker connections lost, by node (host:port) and session (requests or delivery).',
      labelNames,
      registers,
    });
  }

  connected(broker: string): void {
    this.#connected.set({ broker, ...this.#session }, 1);
  }

  lost(broker: string): void {
    this.#connected.set({ broker, ...this.#session }, 0);
    this.#losses.inc({ broker, ...this.#session });
  }
}
