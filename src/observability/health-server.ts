import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * What `/readyz` checks, by name (the worker: `consuming`, `database`); each
 * probe answers quickly and never throws.
 */
export type ReadinessProbes = Readonly<Record<string, () => boolean | Promise<boolean>>>;

export interface HealthServerOptions {
  readonly host: string;
  readonly port: number;
  readonly probes: ReadinessProbes;
  /** Prometheus text and its content type. */
  readonly metrics: () => Promise<{ readonly contentType: string; readonly body: string }>;
}

/**
 * A small HTTP listener for orchestrators and Prometheus:
 * - `/healthz`: 200 while the process runs (liveness);
 * - `/readyz`: 200 when every probe passes (the worker: consuming on a
 *   live broker session, and the database answers a ping), else 503; the
 *   body names each probe's answer (readiness);
 * - `/metrics`: Prometheus text format.
 * Plain `node:http`: three fixed routes need no framework.
 */
export class HealthServer {
  readonly #options: HealthServerOptions;
  readonly #server: Server;
  #closing: Promise<void> | undefined;

  constructor(options: HealthServerOptions) {
    this.#options = options;
    this.#server = createServer((request, response) => {
      void this.#route(request.method ?? 'GET', (request.url ?? '/').split('?')[0] ?? '/').then(
        ({ status, contentType, body }) => {
          response.writeHead(status, { 'content-type': contentType, 'cache-control': 'no-store' });
          response.end(body);
        },
        () => {
          response.writeHead(500, { 'content-type': 'text/plain' });
          response.end('internal error\n');
        },
      );
    });
  }

  /** Listens and returns the bound port (useful with port 0). */
  async listen(): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.#options.port, this.#options.host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    return (this.#server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    this.#closing ??= new Promise<void>((resolve) => {
      this.#server.close(() => {
        resolve();
      });
      this.#server.closeAllConnections();
    });
    return this.#closing;
  }

  async #route(method: string, path: string): Promise<{ status: number; contentType: string; body: string }> {
    const text = 'text/plain; charset=utf-8';
    if (method !== 'GET' && method !== 'HEAD') return { status: 405, contentType: text, body: 'method not allowed\n' };
    switch (path) {
      case '/healthz':
        return { status: 200, contentType: text, body: 'ok\n' };
      case '/readyz': {
        const entries = Object.entries(this.#options.probes);
        const answers = await Promise.all(entries.map(async ([name, probe]) => [name, await probe()] as const));
        const ready = answers.every(([, answer]) => answer);
        return {
          status: ready ? 200 : 503,
          contentType: 'application/json',
          body: JSON.stringify(Object.fromEntries(answers)),
        };
      }
      case '/metrics': {
        const { contentType, body } = await this.#options.metrics();
        return { status: 200, contentType, body };
      }
      default:
        return { status: 404, contentType: text, body: 'not found\n' };
    }
  }
}

/**
 * Starts the listener of an entry point, when it has one, and logs where it
 * listens: the port may be 0 (any), and operators and tests read it there.
 */
export async function listenAndLog(
  health: HealthServer | undefined,
  host: string,
  log: { info(fields: object, message: string): void },
): Promise<void> {
  if (health === undefined) return;
  const port = await health.listen();
  log.info({ host, port }, 'health and metrics listening');
}
