import { Counter, Gauge, type Registry } from 'prom-client';

/**
 * Which broker node a process is connected to, for the worker's and the
 * gateway's `/metrics`: `<prefix>_amqp_connected{broker="host:port"}` is 1
 * for the node of the live connection and 0 for the nodes it was on before;
 * `<prefix>_amqp_connection_losses_total{broker}` counts the losses per node.
 */
export class BrokerMetrics {
  readonly #connected: Gauge<'broker'>;
  readonly #losses: Counter<'broker'>;

  constructor(prefix: string, registry: Registry) {
    const registers = [registry];
    this.#connected = new Gauge({
      name: `${prefix}_amqp_connected`,
      help: 'The broker node of the live connection (1); nodes connected to before and lost (0). Label broker: host:port.',
      labelNames: ['broker'],
      registers,
    });
    this.#losses = new Counter({
      name: `${prefix}_amqp_connection_losses_total`,
      help: 'Broker connections lost, by node (host:port).',
      labelNames: ['broker'],
      registers,
    });
  }

  connected(broker: string): void {
    this.#connected.set({ broker }, 1);
  }

  lost(broker: string): void {
    this.#connected.set({ broker }, 0);
    this.#losses.inc({ broker });
  }
}
