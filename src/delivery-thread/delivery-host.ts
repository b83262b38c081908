import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Config } from '../config/config-schema.js';
import { relayLine, type Logger } from '../logging/logger.js';
import type { MetricsJson } from '../observability/merged-metrics.js';
import {
  restartDelayMs,
  revivedError,
  type DeliveryThreadData,
  type FromDeliveryThread,
  type ToDeliveryThread,
} from './thread-messages.js';

export interface DeliveryHostOptions {
  /** Validated: the thread gets a copy and freezes it. */
  readonly config: Readonly<Config>;
  /** The thread logs at its level, under `logName`, and its lines are written where this logger writes. */
  readonly logger: Logger;
  readonly logName?: string;
  /** The thread's script: `delivery-thread` next to this file unless given (tests give threads that fail). */
  readonly threadUrl?: URL;
  /** The first wait before another thread after one that failed before it started (doubles, up to 30 s). */
  readonly restartDelayMs?: number;
  /** How long a scrape waits for the thread's metrics before it shows the main thread's alone. */
  readonly metricsTimeoutMs?: number;
}

/**
 * Push delivery on a thread of its own (delivery-thread.ts), seen from the
 * worker's main thread: starts it, tells `/readyz` whether it runs, asks
 * it for its metrics at a scrape, writes its log lines, and closes it.
 *
 * A thread that fails before it first started fails the worker's start (a
 * partition count the pool does not share, as before delivery had a
 * thread). One that fails later is logged with its error and replaced:
 * what it held is safe as a crashed worker's is (its broker connections
 * die with it, so what it had not acknowledged goes back to the queues;
 * its journal stays in the store; its partitions are taken again once
 * their leases lapse), and the requests the main thread serves go on.
 */
export class DeliveryHost {
  readonly #options: DeliveryHostOptions;
  readonly #log: Logger;
  readonly #threadUrl: URL;
  readonly #execArgv: string[] | undefined;
  #thread: Worker | undefined;
  /** The running thread said `started`. */
  #started = false;
  #consuming = false;
  /** Threads in a row that ended before they started. */
  #failedStarts = 0;
  #restarts = 0;
  /** Why the running thread is ending: its `start-failed` or its uncaught error. */
  #failure: Error | undefined;
  /** The first start, until the thread says `started` or fails. */
  #firstStart: { resolve: () => void; reject: (error: Error) => void } | undefined;
  #restartTimer: NodeJS.Timeout | undefined;
  #nextId = 1;
  readonly #scrapes = new Map<number, (metrics: MetricsJson) => void>();
  #closing: Promise<void> | undefined;
  #closed: (() => void) | undefined;

  constructor(options: DeliveryHostOptions) {
    this.#options = options;
    this.#log = options.logger;
    // From the sources (tests, tsx) the thread runs from the sources too, through the same loader.
    const ownExtension = extname(fileURLToPath(import.meta.url));
    this.#threadUrl = options.threadUrl ?? new URL(`./delivery-thread${ownExtension}`, import.meta.url);
    // Otherwise the thread inherits the process's options (`--cpu-prof` included).
    this.#execArgv = extname(fileURLToPath(this.#threadUrl)) === '.ts' ? ['--import', 'tsx'] : undefined;
  }

  /**
   * Starts the thread; resolves once delivery started in it, or once
   * `signal` aborts (the worker is stopping); rejects with the error that
   * stopped it from starting.
   */
  async start(signal: AbortSignal): Promise<void> {
    if (this.#firstStart !== undefined || this.#thread !== undefined || this.#closing !== undefined) return;
    if (signal.aborted) return;
    return new Promise<void>((resolve, reject) => {
      this.#firstStart = { resolve, reject };
      signal.addEventListener('abort', () => {
        this.#firstStart = undefined;
        resolve();
      });
      this.#spawn();
    });
  }

  /** The thread runs and delivery started in it: what `/readyz` asks. */
  get ready(): boolean {
    return this.#closing === undefined && this.#thread !== undefined && this.#started;
  }

  /** Ready, and consuming the `notify` queue (what a deliver-only worker's readiness needs). */
  get consuming(): boolean {
    return this.ready && this.#consuming;
  }

  /** Threads started again after one failed. */
  get restarts(): number {
    return this.#restarts;
  }

  /** The thread's metrics; none while no thread runs, or when it does not answer within the timeout. */
  async metrics(): Promise<MetricsJson> {
    const thread = this.#thread;
    if (thread === undefined || !this.#started || this.#closing !== undefined) return [];
    const id = this.#nextId++;
    return new Promise<MetricsJson>((resolve) => {
      const timer = setTimeout(() => {
        this.#scrapes.delete(id);
        resolve([]);
      }, this.#options.metricsTimeoutMs ?? 5_000);
      this.#scrapes.set(id, (metrics) => {
        clearTimeout(timer);
        this.#scrapes.delete(id);
        resolve(metrics);
      });
      this.#post(thread, { type: 'metrics', id });
    });
  }

  /** Closes delivery in the thread as a shutdown does, then ends the thread. Idempotent. */
  async close(): Promise<void> {
    this.#closing ??= this.#shutDown();
    return this.#closing;
  }

  async #shutDown(): Promise<void> {
    clearTimeout(this.#restartTimer);
    this.#firstStart?.resolve();
    this.#firstStart = undefined;
    const thread = this.#thread;
    if (thread === undefined) return;
    await new Promise<void>((resolve) => {
      this.#closed = resolve;
      this.#post(thread, { type: 'close' });
    });
    await thread.terminate();
  }

  #post(thread: Worker, message: ToDeliveryThread): void {
    thread.postMessage(message);
  }

  #spawn(): void {
    const { config, logger } = this.#options;
    const thread = new Worker(this.#threadUrl, {
      workerData: {
        config,
        logLevel: logger.level,
        logName: this.#options.logName ?? 'matrix-push-worker',
      } satisfies DeliveryThreadData,
      ...(this.#execArgv === undefined ? {} : { execArgv: this.#execArgv }),
      name: 'delivery',
    });
    this.#thread = thread;
    this.#started = false;
    this.#consuming = false;
    this.#failure = undefined;
    thread.on('message', (message: FromDeliveryThread) => {
      if (this.#thread === thread) this.#receive(thread, message);
    });
    thread.on('error', (error) => {
      if (this.#thread === thread) this.#failure ??= error;
    });
    thread.on('exit', (code) => {
      this.#exited(thread, code);
    });
  }

  #receive(thread: Worker, message: FromDeliveryThread): void {
    switch (message.type) {
      case 'log':
        relayLine(this.#log, message.line);
        return;
      case 'started':
        this.#started = true;
        this.#failedStarts = 0;
        this.#firstStart?.resolve();
        this.#firstStart = undefined;
        return;
      case 'consuming':
        this.#consuming = message.consuming;
        return;
      case 'metrics':
        this.#scrapes.get(message.id)?.(message.metrics);
        return;
      case 'start-failed':
        this.#failure = revivedError(message.error);
        void thread.terminate();
        return;
      case 'closed':
        this.#closed?.();
        return;
    }
  }

  #exited(thread: Worker, code: number): void {
    if (this.#thread !== thread) return;
    const wasStarted = this.#started;
    this.#thread = undefined;
    this.#started = false;
    this.#consuming = false;
    for (const answer of [...this.#scrapes.values()]) answer([]);
    if (this.#closing !== undefined) {
      this.#closed?.();
      return;
    }
    const error = this.#failure ?? new Error(`the delivery thread exited (code ${String(code)})`);
    const first = this.#firstStart;
    if (first !== undefined) {
      // Never started: the worker does not start either (an orchestrator restarts it, as before).
      this.#firstStart = undefined;
      first.reject(error);
      return;
    }
    this.#failedStarts = wasStarted ? 0 : this.#failedStarts + 1;
    const retryInMs = restartDelayMs(this.#failedStarts, this.#options.restartDelayMs ?? 1000);
    this.#restarts += 1;
    this.#log.error(
      { err: error, code, retryInMs, thread: 'delivery' },
      'the delivery thread stopped; starting another (its partitions are taken again once their leases lapse)',
    );
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = undefined;
      if (this.#closing === undefined && this.#thread === undefined) this.#spawn();
    }, retryInMs);
  }
}
