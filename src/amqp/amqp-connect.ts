import { Socket } from 'node:net';
import { hostname } from 'node:os';
import amqp, { type ChannelModel } from 'amqplib';

export interface AmqpConnectOptions {
  /**
   * Heartbeat interval to ask the broker for; 0 turns heartbeats off.
   * Undefined leaves it to the broker (RabbitMQ suggests 60 s).
   */
  readonly heartbeatSeconds?: number;
  /** Shown by `rabbitmqctl list_connections name client_properties` and the management UI. */
  readonly connectionName?: string;
  /** Bounds the TCP connect and the AMQP handshake; undefined: the OS's own TCP timeout. */
  readonly timeoutMs?: number;
}

/**
 * Opens a broker connection the way every part of the service wants it:
 * TCP_NODELAY, and the heartbeat we configured rather than the broker's.
 *
 * amqplib takes the heartbeat only from the URL's query string (a
 * `heartbeat` socket option is ignored), so the setting is written into the
 * URL here; it replaces a `heartbeat` the URL already carries, so that the
 * configured value is the one in force.
 */
export async function connectAmqp(url: string, options: AmqpConnectOptions = {}): Promise<ChannelModel> {
  // Nagle's algorithm holds back a lone small frame (a reply, an ack)
  // waiting for the peer's delayed ACK: ~40 ms per round trip without this.
  const model = await amqp.connect(withHeartbeat(url, options.heartbeatSeconds), {
    noDelay: true,
    // A node that is down but not refusing (a dead host, a dropped route)
    // would otherwise hold an attempt for the OS's TCP timeout, minutes.
    ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
    ...(options.connectionName === undefined ? {} : { clientProperties: { connection_name: options.connectionName } }),
  });
  coalesceWrites(model);
  return model;
}

/** The part of amqplib's connection (not in its typings) that `coalesceWrites` reaches into. */
interface AmqplibInternals {
  readonly connection?: { readonly stream?: unknown; readonly muxer?: { _readIncoming?: unknown } };
}

/**
 * Sends the frames that amqplib's multiplexer writes in one turn (the
 * replies, acks and publishes of every channel that had some) in one
 * socket write. amqplib writes each frame with its own `socket.write`, and
 * with TCP_NODELAY each is a system call and a TCP segment of its own: at
 * c = 64 a worker spent about a tenth of its CPU in them. Corked for the
 * turn, they leave as one `writev` when it ends; the order of the frames,
 * and the backpressure the multiplexer reads from `write`, are as before.
 * Only the timing of the system call changes: the frames go out at the end
 * of the same synchronous turn.
 *
 * This reaches into amqplib's internals (pinned in package.json): when they
 * are not what it expects, it changes nothing.
 */
export function coalesceWrites(model: ChannelModel): boolean {
  const connection = (model as AmqplibInternals).connection;
  const stream = connection?.stream;
  const muxer = connection?.muxer;
  const readIncoming = muxer?._readIncoming;
  if (!(stream instanceof Socket) || muxer === undefined || typeof readIncoming !== 'function') return false;
  muxer._readIncoming = function readIncomingCorked(this: unknown, ...args: unknown[]): unknown {
    stream.cork();
    try {
      return Reflect.apply(readIncoming, this, args) as unknown;
    } finally {
      stream.uncork();
    }
  };
  return true;
}

/** `url` with its `heartbeat` query parameter set to `seconds` (unchanged when undefined). */
export function withHeartbeat(url: string, seconds: number | undefined): string {
  if (seconds === undefined) return url;
  const parsed = new URL(url);
  parsed.searchParams.set('heartbeat', String(seconds));
  return parsed.toString();
}

/** `<role> <host>:<pid>`: which process a broker connection belongs to. */
export function connectionName(role: string): string {
  return `${role} ${hostname()}:${process.pid}`;
}
