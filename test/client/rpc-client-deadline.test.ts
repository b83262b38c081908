import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RpcClient } from '../../src/client/rpc-client.js';
import { RpcTransportError } from '../../src/client/rpc-errors.js';

/** A TCP listener that accepts and then says nothing: a broker node that hangs in the handshake. */
async function silentNode(): Promise<{ server: Server; port: number; sockets: Socket[] }> {
  const sockets: Socket[] = [];
  const server = createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { server, port: address.port, sockets };
}

const opened: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of opened.splice(0)) await close();
});

describe('RpcClient deadline', () => {
  it('runs from the call: a connection that hangs fails the call with timeout at its deadline, not after the attempt', async () => {
    const node = await silentNode();
    const client = new RpcClient({
      url: `amqp://guest:guest@127.0.0.1:${node.port}`,
      queue: 'q',
      connectTimeoutMs: 10_000,
    });
    opened.push(async () => {
      await client.close();
      for (const socket of node.sockets) socket.destroy();
      await new Promise<void>((resolve) =>
        node.server.close(() => {
          resolve();
        }),
      );
    });
    const started = Date.now();
    const failure = await client
      .request({ op: 'get_pushers', user_id: '@x:example.org' }, { timeoutMs: 300 })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(RpcTransportError);
    expect(failure).toMatchObject({ reason: 'timeout', message: 'no broker connection within 300 ms' });
    // Well before the 10 s attempt timeout.
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
