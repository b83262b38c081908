import type { ChannelModel } from 'amqplib';
import type { BrokerAddress } from '../config/broker-urls.js';
import type { Logger } from '../logging/logger.js';
import { connectionName, type AmqpConnectOptions } from './amqp-connect.js';

/** One open connection, as the owner's `setup` sees it. */
export interface BrokerLink {
  readonly connection: ChannelModel;
  readonly address: BrokerAddress;
  /** This connection was lost or given up: nothing more should be started on it. */
  readonly lost: boolean;
  /**
   * This connection can no longer serve its owner (a channel it needs
   * closed, the broker cancelled a consumer): drop it and connect again.
   * Called during `setup`, it fails that attempt.
   */
  lose(reason: string): void;
}

/** A session up on its link. */
export interface Live<S> {
  readonly link: LinkState;
  readonly session: S;
}

/** A link as the connection layer keeps it: `lost` is set once, by whoever notices first. */
export interface LinkState extends BrokerLink {
  lost: boolean;
}

/** What one attempt at one node needs (the connection layer's options). */
export interface LinkOptions<S> {
  readonly role: string;
  readonly heartbeatSeconds?: number | undefined;
  readonly attemptTimeoutMs: number;
  readonly connect: (url: string, options: AmqpConnectOptions) => Promise<ChannelModel>;
  readonly setup: (link: BrokerLink) => Promise<S>;
  readonly logger?: Logger | undefined;
}

/** Connects to `address` and runs `setup`, all within `attemptTimeoutMs`. */
export async function openLink<S>(
  address: BrokerAddress,
  options: LinkOptions<S>,
  lose: (link: LinkState, reason: string) => void,
): Promise<Live<S>> {
  const { attemptTimeoutMs, heartbeatSeconds, role, logger, connect, setup } = options;
  const started = Date.now();
  const connection = await connect(address.url, {
    ...(heartbeatSeconds === undefined ? {} : { heartbeatSeconds }),
    connectionName: connectionName(role),
    timeoutMs: attemptTimeoutMs,
  });
  const link: LinkState = {
    connection,
    address,
    lost: false,
    lose: (reason) => {
      lose(link, reason);
    },
  };
  connection.on('error', (error: Error) => {
    logger?.warn({ err: error, broker: address.label }, 'AMQP connection error');
  });
  // amqplib passes why the connection closed (the broker's close code and
  // text, a socket error, a missed heartbeat); none when we closed it.
  connection.on('close', (error?: unknown) => {
    const reason = closeReason('connection closed', error);
    if (link.lost && error !== undefined && error !== null) {
      // amqplib closes the channels before the connection says why, so
      // the owner may have reported the loss already ("channel closed"):
      // this line carries the cause.
      logger?.warn({ broker: address.label, reason }, 'the broker connection closed');
    }
    lose(link, reason);
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    const left = Math.max(1, attemptTimeoutMs - (Date.now() - started));
    const session = await Promise.race([
      setup(link),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          reject(new Error(`setting up the session on ${address.label} took over ${attemptTimeoutMs} ms`));
        }, left);
      }),
    ]);
    if (link.lost) throw new Error(`the connection to ${address.label} was lost while it was set up`);
    return { link, session };
  } catch (error) {
    link.lost = true;
    // Not awaited: the next node is tried now, not once this one has said goodbye.
    void connection.close().catch(() => undefined);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `what`, and the error that caused it when there is one: "connection closed:
 * Connection closed: 320 (CONNECTION-FORCED) with message ...". An operator
 * reading why a session was lost needs the broker's own words.
 */
export function closeReason(what: string, error: unknown): string {
  if (error === undefined || error === null) return what;
  const message = error instanceof Error ? error.message : typeof error === 'string' ? error : describe(error);
  return message === '' ? what : `${what}: ${message}`;
}

/** Any other value, as JSON when it is representable (a cyclic value or a BigInt is not). */
function describe(value: unknown): string {
  try {
    // undefined for a function or a symbol, whatever the typings say.
    const text = JSON.stringify(value) as string | undefined;
    return text ?? '';
  } catch {
    return '';
  }
}

/**
 * Closes a connection without waiting for the broker's answer for longer
 * than `ms`: amqplib's close waits for CloseOk with no timer of its own, and
 * a node that went silent would hold the caller until heartbeats gave up.
 */
export async function closeWithin(connection: ChannelModel, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    connection.close().catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
}
