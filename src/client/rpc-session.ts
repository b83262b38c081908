import type { Channel, ConfirmChannel, Options } from 'amqplib';
import type { BrokerLink } from '../amqp/broker-link.js';
import type { Reply } from '../contract/reply.js';
import { EncodedBody } from './encoded-body.js';
import { RpcRequestError, RpcTransportError, type TransportFailure } from './rpc-errors.js';

/** A call waiting for its reply (or its confirm). */
export interface Pending {
  readonly resolve: (reply: Reply) => void;
  readonly reject: (error: RpcTransportError) => void;
  readonly timer: NodeJS.Timeout;
  /** A read sent to the read queue: where to send it instead if that queue returns it. */
  fallback?: { readonly content: Buffer; readonly properties: Options.Publish };
}

/** What the client keeps on one broker connection, replaced as a whole when it is lost. */
export interface Session {
  readonly link: BrokerLink;
  /** With publisher confirms: a request the broker did not take is known at once, not at its deadline. */
  readonly channel: ConfirmChannel;
  readonly pending: Map<string, Pending>;
  /** The read queue had a consumer when last counted. */
  readQueueServed: boolean;
  /** Its connection was lost: nothing more is sent on it. */
  retired: boolean;
  /** Counts the read queue's consumers; its own channel, since a missing queue closes the channel that asks. */
  probe?: Channel;
  probeTimer?: NodeJS.Timeout;
}

/** A call's body as the bytes sent: an `EncodedBody` as its text, anything else as JSON (`RpcRequestError` if it cannot be). */
export function serialize(body: object): Buffer {
  if (body instanceof EncodedBody) return Buffer.from(body.json);
  try {
    return Buffer.from(JSON.stringify(body));
  } catch (error) {
    throw new RpcRequestError(`the request body cannot be serialized as JSON: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/** Ends a pending call `how`, once: a second reply, or a confirm after a timeout, finds nothing. */
export function settle(session: Session, correlationId: string, how: (pending: Pending) => void): void {
  const pending = session.pending.get(correlationId);
  if (pending === undefined) return;
  clearTimeout(pending.timer);
  session.pending.delete(correlationId);
  how(pending);
}

/** Every call pending on the session fails with `reason`. */
export function failAll(session: Session, reason: TransportFailure, message: string): void {
  for (const id of [...session.pending.keys()]) {
    settle(session, id, (p) => {
      p.reject(new RpcTransportError(reason, message));
    });
  }
}

/** The envelope, trusted to be the contract's once it is a JSON object. */
export function parseReply(content: Buffer): Reply | undefined {
  try {
    const value: unknown = JSON.parse(content.toString('utf8'));
    return typeof value === 'object' && value !== null && 'ok' in value ? (value as Reply) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Counts the read queue's consumers now and every `readProbeIntervalMs`:
 * reads go there only while some worker consumes it, so a read is never
 * left waiting in a queue nobody reads (a queue that does not exist
 * returns the read at once, and it is sent to the request queue).
 */
export async function watchReadQueue(session: Session, readQueue: string, intervalMs: number): Promise<void> {
  const count = async () => {
    // A session whose attempt failed, or that was lost, is never retired by
    // the layer when it was never live: stop counting for it here.
    if (session.link.lost) {
      clearInterval(session.probeTimer);
      return;
    }
    try {
      if (session.probe === undefined) {
        const probe = await session.link.connection.createChannel();
        probe.on('error', () => undefined);
        probe.on('close', () => {
          if (session.probe === probe) delete session.probe;
        });
        session.probe = probe;
      }
      const { consumerCount } = await session.probe.checkQueue(readQueue);
      session.readQueueServed = consumerCount > 0;
    } catch {
      // Not declared (the probe channel is closed by the broker), or the connection is going.
      session.readQueueServed = false;
    }
  };
  await count();
  session.probeTimer = setInterval(() => void count(), intervalMs);
  session.probeTimer.unref();
}
