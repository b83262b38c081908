import type { EventEmitter } from 'node:events';
import type { Dispatcher } from 'undici';
import type { GatewayExchange } from '../delivery/response-outcome.js';
import { errorCode, failedExchange, firstValue } from './gateway-response.js';

/** The request's bounds on the answer. */
export interface ExchangeLimits {
  /** A 2xx body longer is dropped whole; any other, cut off with its connection. */
  readonly maxBodyBytes: number;
  /** The whole body, from the status line on. */
  readonly bodyTimeoutMs: number;
}

/** What `destroy` aborts: `aborted`, `reason` and an `abort` event (gateway-client.ts `InFlightAbort`). */
export interface InFlightSignal extends EventEmitter {
  readonly aborted: boolean;
  readonly reason: Error | undefined;
}

/**
 * One request's exchange through undici's dispatch handler: the status,
 * `Retry-After` and the body read straight off the parser's callbacks,
 * with no response stream, async resource or promise per chunk (what
 * `Agent.request` builds for every request). Settles once, with the
 * exchange, or rejects with what `failedExchange` throws (not the
 * network's doing).
 *
 * A 2xx body is kept up to `maxBodyBytes` (more, too slow or broken off:
 * dropped whole, never a prefix, which could parse as a different
 * `rejected` list); any other body is read to its end and thrown away, so
 * that its connection carries the next request, or cut off with its
 * connection past the same bounds (a gateway failing with large bodies
 * costs a bounded read, never memory).
 */
export class GatewayExchangeHandler implements Dispatcher.DispatchHandler {
  readonly #settle: (exchange: GatewayExchange) => void;
  readonly #fail: (error: unknown) => void;
  readonly #limits: ExchangeLimits;
  readonly #inFlight: InFlightSignal;
  #controller: Dispatcher.DispatchController | undefined;
  #status = 0;
  #retryAfter: string | undefined;
  #chunks: Buffer[] | undefined;
  #size = 0;
  #timer: NodeJS.Timeout | undefined;
  #timedOut = false;
  #settled = false;
  #listening = false;
  readonly #onAbort = () => {
    this.#controller?.abort(this.#inFlight.reason ?? new Error('aborted'));
  };

  constructor(
    settle: (exchange: GatewayExchange) => void,
    fail: (error: unknown) => void,
    limits: ExchangeLimits,
    inFlight: InFlightSignal,
  ) {
    this.#settle = settle;
    this.#fail = fail;
    this.#limits = limits;
    this.#inFlight = inFlight;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#inFlight.aborted) {
      controller.abort(this.#inFlight.reason ?? new Error('aborted'));
      return;
    }
    // Once per request (undici may start a request again), on an EventEmitter: O(1), unlike an AbortSignal's listeners.
    if (this.#listening) return;
    this.#listening = true;
    this.#inFlight.once('abort', this.#onAbort);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    // An informational answer: the final one follows.
    if (statusCode < 200) return;
    this.#status = statusCode;
    this.#retryAfter = firstValue(headers['retry-after']);
    // Only a 2xx body means anything (its `rejected`).
    if (statusCode < 300) this.#chunks = [];
    this.#timer = setTimeout(() => {
      this.#timedOut = true;
      controller.abort(new Error('the response body took too long'));
    }, this.#limits.bodyTimeoutMs);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#settled) return;
    this.#size += chunk.length;
    if (this.#size > this.#limits.maxBodyBytes) {
      // The rest is never read: the connection goes with it.
      this.#answer(this.#chunks === undefined ? {} : { bodyDropped: 'too-large' });
      controller.abort(new Error('the response body is too large'));
      return;
    }
    this.#chunks?.push(chunk);
  }

  onResponseEnd(): void {
    if (this.#chunks === undefined) {
      this.#answer({});
      return;
    }
    const text = Buffer.concat(this.#chunks).toString('utf8');
    this.#answer(text === '' ? {} : { body: text });
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.#settled) return;
    if (this.#status !== 0) {
      // The status stands; a body nobody needs is simply gone.
      const timeout = this.#timedOut || errorCode(error) === 'UND_ERR_BODY_TIMEOUT';
      this.#answer(this.#chunks === undefined ? {} : { bodyDropped: timeout ? 'timeout' : 'connection-error' });
      return;
    }
    this.#done();
    try {
      this.#settle(failedExchange(error));
    } catch (notTheNetwork) {
      this.#fail(notTheNetwork);
    }
  }

  #answer(read: { body?: string; bodyDropped?: 'too-large' | 'timeout' | 'connection-error' }): void {
    if (this.#settled) return;
    this.#done();
    const retryAfter = this.#retryAfter;
    this.#settle({
      kind: 'response',
      status: this.#status,
      ...(retryAfter === undefined ? {} : { retryAfter }),
      ...read,
    });
  }

  #done(): void {
    this.#settled = true;
    clearTimeout(this.#timer);
    this.#inFlight.off('abort', this.#onAbort);
  }
}
