import autocannon from 'autocannon';
import type { LoopResult } from './closed-loop.js';

export interface HttpLoadOptions {
  readonly url: string;
  readonly concurrency: number;
  readonly warmupMs: number;
  readonly measureMs: number;
  /** The `i`th request: method, path, bearer token and JSON body. */
  readonly request: (i: number) => {
    readonly method: 'GET' | 'PUT';
    readonly path: string;
    readonly token: string;
    readonly body?: unknown;
  };
}

/**
 * The HTTP side of the gateway comparison: autocannon with one connection
 * per caller and no pipelining, so `concurrency` requests are in flight as
 * in the RPC closed loop. A warm-up run comes first and is not counted.
 */
export async function runHttpLoad(options: HttpLoadOptions): Promise<LoopResult> {
  const counter = { next: 0 };
  const run = async (ms: number) =>
    autocannon({
      url: options.url,
      connections: options.concurrency,
      pipelining: 1,
      duration: ms / 1000,
      requests: [
        {
          setupRequest: (request) => {
            const { method, path, token, body } = options.request(counter.next);
            counter.next += 1;
            return {
              ...request,
              method,
              path,
              headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
              ...(body === undefined ? {} : { body: JSON.stringify(body) }),
            };
          },
        },
      ],
    });
  if (options.warmupMs > 0) await run(options.warmupMs);
  const result = await run(options.measureMs);
  const errors = result.errors + result.timeouts + result.non2xx;
  return {
    concurrency: options.concurrency,
    ops: result['2xx'],
    errors,
    firstError:
      errors > 0 ? `${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts` : undefined,
    throughput: result['2xx'] / (options.measureMs / 1000),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
  };
}
