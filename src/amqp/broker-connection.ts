import { setTimeout as sleep } from 'node:timers/promises';
import type { ChannelModel } from 'amqplib';
import type { Logger } from '../logging/logger.js';
import { backoffDelay, type BackoffPolicy } from '../retry/backoff.js';
import { parseBrokerAddresses, type BrokerAddress, type BrokerUrls } from '../config/broker-urls.js';
import { AddressRotation } from './broker-addresses.js';
import { connectAmqp, type AmqpConnectOptions } from './amqp-connect.js';
import { closeWithin, openLink, type BrokerLink, type Live, type LinkState } from './broker-link.js';

/** What the rest of the service hears of the connection; every hook is optional. */
export interface BrokerConnectionObserver {
  /** A session is up on `address`; `again` when it replaces a lost one. */
  connected?(address: BrokerAddress, again: boolean): void;
  /** The session on `address` was lost; reconnecting starts at once. */
  lost?(address: BrokerAddress, reason: string): void;
  /** `close()` finished: no session, and none will be opened. */
  closed?(): void;
}

export interface BrokerConnectionOptions<S> {
  readonly urls: BrokerUrls;
  /** Names the connection in the broker's tools: `<role> <host>:<pid>`. */
  readonly role: string;
  /** Heartbeat interval asked of the broker; 0 turns heartbeats off, undefined leaves it to the broker. */
  readonly heartbeatSeconds?: number;
  /** Bounds one attempt at one node: TCP and AMQP handshake, then `setup`. */
  readonly attemptTimeoutMs: number;
  /** The wait between rounds, after every node of a round failed; never between the nodes of a round. */
  readonly backoff: BackoffPolicy;
  /** Opens what the owner needs on a new connection (channels, queues, consumers); a throw fails the attempt. */
  readonly setup: (link: BrokerLink) => Promise<S>;
  /**
   * The session's connection was lost. Runs once, before the next attempt
   * starts; the old connection is closed when the promise it returns
   * settles (the worker lets requests in flight on it finish first).
   */
  readonly retire?: (session: S, reason: string) => Promise<void> | void;
  readonly observer?: BrokerConnectionObserver;
  readonly logger?: Logger;
  readonly random?: () => number;
  /** How a connection is opened; tests pass a fake. */
  readonly connect?: (url: string, options: AmqpConnectOptions) => Promise<ChannelModel>;
  /** How the backoff between rounds is waited out (ends early when `signal` aborts); tests pass a recorder. */
  readonly wait?: (ms: number, signal: AbortSignal) => Promise<void>;
}

async function waitFor(ms: number, signal: AbortSignal): Promise<void> {
  await sleep(ms, undefined, { signal }).catch(() => undefined);
}

type State = 'idle' | 'connecting' | 'waiting' | 'connected' | 'closed';

interface Waiter<S> {
  readonly resolve: (session: S) => void;
  readonly reject: (error: Error) => void;
}

/** Why there is no session: the last failed round's error, or `close()`. */
export class BrokerUnavailableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'BrokerUnavailableError';
  }
}

/**
 * The one connection layer of the service: the worker, the RPC client and
 * so the gateway each keep one of these.
 *
 * It keeps one connection to one node of the broker (any of `urls`,
 * shuffled per process), with the owner's session on it (what `setup`
 * opened). When the connection is lost (closed, a heartbeat missed, the
 * owner calls `lose`), the next node is tried at once, round-robin; only
 * after a whole round failed does it wait, with capped, jittered backoff,
 * before the next round. So a node that dies costs one immediate attempt
 * at another node, and a single restarted broker is tried again within
 * `backoff.maxMs` of coming back.
 *
 * amqplib 2's own recovery reconnects to one URL and has no step between
 * "lost" and "closed" for requests in flight to finish; the connection
 * itself (framing, heartbeats, channels) is amqplib's.
 */
export class BrokerConnection<S> {
  readonly #options: BrokerConnectionOptions<S>;
  readonly #rotation: AddressRotation;
  readonly #connect: (url: string, options: AmqpConnectOptions) => Promise<ChannelModel>;
  readonly #wait: (ms: number, signal: AbortSignal) => Promise<void>;
  readonly #stop = new AbortController();
  #state: State = 'idle';
  #live: Live<S> | undefined;
  #everConnected = false;
  #lastError: Error | undefined;
  #waiters: Waiter<S>[] = [];
  #loop: Promise<void> | undefined;
  #closing: Promise<void> | undefined;

  constructor(options: BrokerConnectionOptions<S>) {
    this.#options = options;
    this.#rotation = new AddressRotation(parseBrokerAddresses(options.urls), options.random);
    this.#connect = options.connect ?? connectAmqp;
    this.#wait = options.wait ?? waitFor;
  }

  /** The nodes, in the order this process tries them. */
  get addresses(): readonly BrokerAddress[] {
    return this.#rotation.order;
  }

  /** The node of the live session, if there is one. */
  get address(): BrokerAddress | undefined {
    return this.#live?.link.address;
  }

  /** The live session, if there is one. */
  get current(): S | undefined {
    return this.#live?.session;
  }

  /**
   * Connects, trying round after round until a session is up; resolves with
   * it, or with `undefined` if `close()` came first. From then on, a lost
   * session is replaced by itself.
   */
  async start(): Promise<S | undefined> {
    for (;;) {
      try {
        return await this.session();
      } catch {
        if (this.#state === 'closed') return undefined;
        // A round failed; the next one starts after its backoff.
        await this.#loop;
      }
    }
  }

  /**
   * The live session; or, while attempts are under way, the session they
   * open, rejected if the whole round fails (bound the wait by your own
   * deadline: a round may take `attemptTimeoutMs` per node). Between rounds (waiting out
   * the backoff) it rejects at once with the last failure, so that a
   * caller with a deadline is not held for a broker that is not there.
   * Never connected yet: starts connecting.
   */
  async session(): Promise<S> {
    switch (this.#state) {
      case 'connected':
        if (this.#live !== undefined) return this.#live.session;
        break;
      case 'closed':
        throw new BrokerUnavailableError('the broker connection is closed');
      case 'waiting':
        throw new BrokerUnavailableError(`cannot reach the broker: ${this.#lastError?.message ?? 'no node answered'}`, {
          cause: this.#lastError,
        });
      case 'idle':
        this.#reconnect();
        break;
      case 'connecting':
        break;
    }
    return new Promise<S>((resolve, reject) => {
      this.#waiters.push({ resolve, reject });
    });
  }

  /**
   * Stops reconnecting (an attempt under way closes its connection if it
   * succeeds), runs `beforeDisconnect`
   * with the live session (if any; the worker cancels its consumers and lets
   * requests in flight finish there), then closes the connection.
   * Idempotent: later calls wait for the first.
   */
  async close(beforeDisconnect?: (session: S) => Promise<void> | void): Promise<void> {
    this.#closing ??= this.#shutDown(beforeDisconnect);
    return this.#closing;
  }

  async #shutDown(beforeDisconnect: ((session: S) => Promise<void> | void) | undefined): Promise<void> {
    this.#state = 'closed';
    this.#stop.abort();
    this.#failWaiters(new BrokerUnavailableError('the broker connection is closed'));
    // An attempt under way is not waited for (a node that hangs in the
    // handshake would hold close() for attemptTimeoutMs): if it succeeds
    // after all, `#attempts` sees the layer closed and closes it.
    const live = this.#live;
    this.#live = undefined;
    if (live !== undefined) {
      if (beforeDisconnect !== undefined && !live.link.lost) {
        try {
          await beforeDisconnect(live.session);
        } catch {
          // Closing goes on: the connection is closed below whatever happened.
        }
      }
      await closeWithin(live.link.connection, this.#options.attemptTimeoutMs);
    }
    this.#options.observer?.closed?.();
  }

  /** A call, not the field: `close()` changes the state while an attempt is awaited. */
  #closed(): boolean {
    return this.#state === 'closed';
  }

  /** Starts the attempts, unless they are under way or the layer is closed. */
  #reconnect(): void {
    if (this.#state === 'connecting' || this.#state === 'waiting' || this.#state === 'closed') return;
    this.#state = 'connecting';
    this.#loop = this.#attempts();
  }

  async #attempts(): Promise<void> {
    const { backoff, logger } = this.#options;
    // Measured from the loss (or the first attempt) to the session being up again.
    const since = Date.now();
    while (this.#state !== 'closed') {
      const address = this.#rotation.take();
      const attemptStarted = Date.now();
      if (this.#everConnected) logger?.info({ broker: address.label }, 'reconnecting to RabbitMQ');
      try {
        const live = await openLink(address, { ...this.#options, connect: this.#connect }, (link, reason) => {
          this.#lose(link, reason);
        });
        if (this.#closed()) {
          await closeWithin(live.link.connection, this.#options.attemptTimeoutMs);
          return;
        }
        this.#rotation.succeeded();
        this.#live = live;
        this.#state = 'connected';
        const again = this.#everConnected;
        this.#everConnected = true;
        const timing = { attemptMs: Date.now() - attemptStarted, totalMs: Date.now() - since };
        logger?.info(
          { broker: address.label, connection: this.#options.role, nodes: this.#rotation.order.length, ...timing },
          again ? 'reconnected to RabbitMQ' : 'connected to RabbitMQ',
        );
        this.#options.observer?.connected?.(address, again);
        const waiters = this.#waiters;
        this.#waiters = [];
        for (const waiter of waiters) waiter.resolve(live.session);
        return;
      } catch (error) {
        if (this.#closed()) return;
        this.#lastError = error instanceof Error ? error : new Error(String(error));
        const rounds = this.#rotation.failed();
        if (rounds === undefined) {
          logger?.warn(
            { err: this.#lastError, broker: address.label, attemptMs: Date.now() - attemptStarted },
            'cannot reach this RabbitMQ node; trying the next one',
          );
          continue;
        }
        const retryInMs = Math.max(backoff.baseMs, backoffDelay(backoff, rounds - 1, this.#options.random));
        logger?.warn(
          {
            err: this.#lastError,
            broker: address.label,
            nodes: this.#rotation.order.length,
            round: rounds,
            retryInMs,
            attemptMs: Date.now() - attemptStarted,
          },
          'cannot reach RabbitMQ; retrying',
        );
        this.#state = 'waiting';
        this.#failWaiters(
          new BrokerUnavailableError(`cannot reach the broker: ${this.#lastError.message}`, { cause: this.#lastError }),
        );
        await this.#wait(retryInMs, this.#stop.signal);
        // `close()` may have run during the wait.
        if (this.#closed()) return;
        this.#state = 'connecting';
      }
    }
  }

  /** Drops `link` (once); if it carried the live session, retires it and reconnects at once. */
  #lose(link: LinkState, reason: string): void {
    if (link.lost) return;
    link.lost = true;
    const live = this.#live;
    if (live?.link !== link) return;
    this.#live = undefined;
    if (this.#state === 'closed') return;
    let retiring: Promise<void>;
    try {
      // First: the owner stops using the session (the client fails its
      // pending calls) before a new one can be handed out.
      retiring = Promise.resolve(this.#options.retire?.(live.session, reason));
    } catch (error) {
      retiring = Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    void retiring.catch(() => undefined).then(async () => closeWithin(link.connection, this.#options.attemptTimeoutMs));
    this.#state = 'idle';
    try {
      // Said before the first attempt logs its own line, so that the log reads in order.
      this.#options.logger?.warn({ broker: link.address.label, reason }, 'lost the broker connection; reconnecting');
    } catch {
      // A logger's failure must not leave the layer idle.
    }
    // Then reconnecting, before the hooks: a hook that throws must not leave the layer idle.
    this.#reconnect();
    try {
      this.#options.observer?.lost?.(link.address, reason);
    } catch {
      // An observer's failure is not the connection's.
    }
  }

  #failWaiters(error: Error): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const waiter of waiters) waiter.reject(error);
  }
}
