import { createServer, request as forward, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The paths an operator routes to the gateway (docs/gateway.md, Routes). */
export const GATEWAY_PATHS = /^\/_matrix\/client\/(r0|v3)\/(pushrules|pushers)(\/|$|\?)/;

/**
 * A homeserver front as a client sees it: the push-rule and pusher paths go
 * to the gateway, `/_matrix/client/versions` is answered as a homeserver
 * would, everything else is not found. Clients such as matrix-js-sdk ask
 * `/versions` before some calls.
 */
export async function startFrontProxy(gatewayUrl: string): Promise<{ url: string; close: () => Promise<void> }> {
  const target = new URL(gatewayUrl);
  const server: Server = createServer((incoming, outgoing) => {
    const path = incoming.url ?? '/';
    if (path.startsWith('/_matrix/client/versions')) {
      outgoing
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ versions: ['r0.6.1', 'v1.1', 'v1.11'], unstable_features: {} }));
      return;
    }
    if (!GATEWAY_PATHS.test(path)) {
      outgoing
        .writeHead(404, { 'content-type': 'application/json' })
        .end(JSON.stringify({ errcode: 'M_UNRECOGNIZED', error: 'Unrecognized request' }));
      return;
    }
    const upstream = forward(
      { host: target.hostname, port: target.port, method: incoming.method, path, headers: incoming.headers },
      (response) => {
        outgoing.writeHead(response.statusCode ?? 502, response.headers);
        response.pipe(outgoing);
      },
    );
    upstream.on('error', () => outgoing.writeHead(502).end());
    incoming.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
