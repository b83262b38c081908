import * as http from 'node:http';

/** One exchange of the bare client: the status, or why there is none. */
export type BareExchange = { readonly status: number } | { readonly error: string };

/**
 * The floor a push costs (issue 42's baseline): a bare `node:http`
 * keep-alive client, with the caps the worker's client has (`perOrigin` in
 * flight per gateway, `total` in all) and nothing else: no slots by user or
 * address, no address policy, no classification. It POSTs a JSON text and
 * reads the answer to its end.
 */
export class BareHttpClient {
  readonly #agent: http.Agent;

  constructor(perOrigin: number, total: number) {
    this.#agent = new http.Agent({ keepAlive: true, maxSockets: perOrigin, maxTotalSockets: total });
  }

  async send(url: string, body: string): Promise<BareExchange> {
    return new Promise((resolve) => {
      const request = http.request(
        url,
        {
          method: 'POST',
          agent: this.#agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (response) => {
          response.on('data', () => undefined);
          response.on('end', () => {
            resolve({ status: response.statusCode ?? 0 });
          });
          response.on('error', (error) => {
            resolve({ error: error.message });
          });
        },
      );
      request.on('error', (error) => {
        resolve({ error: error.message });
      });
      request.end(body);
    });
  }

  close(): void {
    this.#agent.destroy();
  }
}
