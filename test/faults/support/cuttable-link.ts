import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP relay in front of one service, for one process: `cut` makes it go
 * silent both ways (bytes held, new connections accepted and left
 * hanging), as a network partition between that process and the service
 * does, while every other process reaches the service as before. `drop`
 * closes every relayed connection and closes each new one at once, as a
 * service that went down does; `mend` ends either.
 */
export interface CuttableLink {
  /** `host:port` to give the process instead of the service's. */
  readonly address: string;
  cut(): void;
  drop(): void;
  mend(): void;
  close(): Promise<void>;
}

export async function startCuttableLink(target: { host: string; port: number }): Promise<CuttableLink> {
  /** Each relayed direction: where bytes go, and what waits while the link is cut. */
  const directions = new Set<{ readonly to: Socket; readonly held: Buffer[] }>();
  const sockets = new Set<Socket>();
  let cut = false;
  let dropped = false;
  const relay = (from: Socket, to: Socket) => {
    const direction = { to, held: [] as Buffer[] };
    directions.add(direction);
    from.on('data', (chunk: Buffer) => {
      if (cut) direction.held.push(chunk);
      else to.write(chunk);
    });
    from.on('close', () => directions.delete(direction));
  };
  const server: Server = createServer((incoming) => {
    if (dropped) {
      incoming.destroy();
      return;
    }
    const outgoing = connect(target.port, target.host);
    sockets.add(incoming).add(outgoing);
    relay(incoming, outgoing);
    relay(outgoing, incoming);
    const end = () => {
      sockets.delete(incoming);
      sockets.delete(outgoing);
      incoming.destroy();
      outgoing.destroy();
    };
    incoming.on('error', end).on('close', end);
    outgoing.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    address: `127.0.0.1:${String(port)}`,
    cut: () => {
      cut = true;
    },
    drop: () => {
      dropped = true;
      for (const socket of sockets) socket.destroy();
    },
    mend: () => {
      cut = false;
      dropped = false;
      for (const direction of directions) for (const chunk of direction.held.splice(0)) direction.to.write(chunk);
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      });
    },
  };
}
