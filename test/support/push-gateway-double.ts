import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { retryAfterHeader, sendJson } from './gateway-double-answers.js';
import type { BehaviourScope, GatewayBehaviour } from './gateway-double-behaviour.js';
import type { DeviceDelivery, GatewayStats, RecordedRequest, Recording } from './gateway-double-records.js';
import { devicesOf, notifyBodyProblem, parseJson } from './notify-body-shape.js';

/**
 * A push gateway for tests and the bench: a local HTTP(S) server on
 * 127.0.0.1 that speaks the Matrix Push Gateway API's
 * `POST /_matrix/push/v1/notify` (https://spec.matrix.org/latest/push-gateway-api/),
 * records every request, and misbehaves on demand the ways real gateways do:
 * slowly, with any status, with `Retry-After`, by hanging, by holding its
 * answers until told, by resetting the connection, by rejecting pushkeys, by redirecting, or by going down and
 * coming back on the same port.
 *
 * It checks each body against the spec's shape and answers 400 when it is
 * wrong, so a test that delivers through it also checks what was sent.
 */

const NOTIFY_PATH = '/_matrix/push/v1/notify';

/** Bodies above this are refused with 413, as Sygnal (the reference gateway) does at 512 KiB. */
const MAX_BODY_BYTES = 512 * 1024;

interface Rule {
  readonly behaviour: GatewayBehaviour;
  remaining: number;
}

/** The key of the rule that applies to every request. */
const EVERY_REQUEST = Symbol('every request');

export class PushGatewayDouble {
  readonly #server: Server;
  readonly #protocol: 'http' | 'https';
  #port = 0;
  #listening = false;
  readonly #sockets = new Set<Socket>();
  #connections = 0;
  readonly #timers = new Set<NodeJS.Timeout>();
  /** The answers of the requests held (`hold`), in the order received. */
  readonly #held: (() => void)[] = [];
  readonly #rules = new Map<string | typeof EVERY_REQUEST, Rule>();
  readonly #rejected = new Set<string>();
  readonly #requests: RecordedRequest[] = [];
  readonly #recording: Recording;
  #received = 0;
  #answers: Record<string, number> = {};
  #devicesDelivered = 0;
  #firstAt: number | undefined;
  #lastAt: number | undefined;
  /** By pushkey, in the order received: what each device got. */
  readonly #deviceLog = new Map<string, DeviceDelivery[]>();
  readonly #waiters = new Set<() => void>();

  private constructor(tls: { readonly key: string; readonly cert: string } | undefined, recording: Recording) {
    this.#recording = recording;
    const handler = (request: IncomingMessage, response: ServerResponse): void => {
      this.#receive(request, response);
    };
    this.#server = tls === undefined ? createHttpServer(handler) : createHttpsServer(tls, handler);
    this.#protocol = tls === undefined ? 'http' : 'https';
    // The raw TCP sockets (under TLS too): to reset one, and to close them all when going down.
    this.#server.on('connection', (socket: Socket) => {
      this.#connections += 1;
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
  }

  /**
   * A double listening on 127.0.0.1 on a free port: plain HTTP, or HTTPS
   * with the given key and certificate (see throwaway-ca.ts). Records every
   * request whole unless `recording` is `light`.
   */
  static async start(
    options: { readonly tls?: { readonly key: string; readonly cert: string }; readonly recording?: Recording } = {},
  ) {
    const double = new PushGatewayDouble(options.tls, options.recording ?? 'full');
    await double.#listen(0);
    return double;
  }

  get port(): number {
    return this.#port;
  }

  /** `http(s)://127.0.0.1:<port>` */
  get origin(): string {
    return `${this.#protocol}://127.0.0.1:${this.#port}`;
  }

  /** The URL a pusher's `data.url` names to reach this double. */
  get notifyUrl(): string {
    return `${this.origin}${NOTIFY_PATH}`;
  }

  /**
   * How many TCP connections it has accepted so far (kept across `down`
   * and `up`): how a test sees keep-alive reuse, a pool's size, or that a
   * refused address was never connected to.
   */
  get connections(): number {
    return this.#connections;
  }

  /** Every request received so far, oldest first; always empty with the `light` recording. */
  get requests(): readonly RecordedRequest[] {
    return this.#requests;
  }

  /** Counts of the requests received so far (both recordings). */
  get stats(): GatewayStats {
    return {
      requests: this.#received,
      answers: { ...this.#answers },
      devicesDelivered: this.#devicesDelivered,
      firstAt: this.#firstAt,
      lastAt: this.#lastAt,
    };
  }

  /** What each device (by pushkey) got in requests answered 200, in the order received (both recordings). */
  get deviceLog(): ReadonlyMap<string, readonly DeviceDelivery[]> {
    return this.#deviceLog;
  }

  /** Applies a behaviour to every request, or to those with a device of one pushkey (which win), replacing the one before. */
  behave(behaviour: GatewayBehaviour, scope: BehaviourScope = {}): void {
    this.#rules.set(scope.pushkey ?? EVERY_REQUEST, { behaviour, remaining: scope.times ?? Infinity });
  }

  /** From now on, these pushkeys are listed in `rejected` whenever a request names them. */
  reject(...pushkeys: string[]): void {
    for (const pushkey of pushkeys) this.#rejected.add(pushkey);
  }

  /** Back to answering 200 at once and rejecting nothing; the record is kept. */
  restore(): void {
    this.#rules.clear();
    this.#rejected.clear();
  }

  /** Answers every request held (`hold`), oldest first; how many there were. */
  answerHeld(): number {
    const answers = this.#held.splice(0);
    for (const answer of answers) answer();
    return answers.length;
  }

  /** Forgets the requests recorded so far, their counts and the device log. */
  clearRequests(): void {
    this.#requests.length = 0;
    this.#received = 0;
    this.#answers = {};
    this.#devicesDelivered = 0;
    this.#firstAt = undefined;
    this.#lastAt = undefined;
    this.#deviceLog.clear();
  }

  /** Resolves with the record once at least `count` requests arrived; rejects after `timeoutMs`. */
  async waitForRequests(count: number, timeoutMs = 5_000): Promise<readonly RecordedRequest[]> {
    if (this.#received >= count) return this.#requests;
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (this.#received < count) return;
        cleanUp();
        resolve(this.#requests);
      };
      const timer = setTimeout(() => {
        cleanUp();
        reject(new Error(`the push gateway double got ${this.#received} of ${count} requests in ${timeoutMs} ms`));
      }, timeoutMs);
      const cleanUp = (): void => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      this.#waiters.add(check);
    });
  }

  /**
   * The gateway goes down: it stops listening (new connections are
   * refused) and drops every open connection, hanging and delayed
   * requests included, as a crashed gateway would.
   */
  async down(): Promise<void> {
    if (!this.#listening) return;
    this.#listening = false;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    this.#held.length = 0;
    const closed = new Promise<void>((resolve) =>
      this.#server.close(() => {
        resolve();
      }),
    );
    for (const socket of this.#sockets) socket.destroy();
    await closed;
  }

  /** The gateway comes back, on the same port (its pushers' URLs still name it). */
  async up(): Promise<void> {
    if (this.#listening) return;
    // The port was free a moment ago; in the rare case something took it in between, wait a little for it.
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.#listen(this.#port);
        return;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 20) throw error;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  }

  /** Stops it for good: the listener, every connection, every pending answer. */
  async close(): Promise<void> {
    await this.down();
  }

  async #listen(port: number): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      const failed = (error: Error): void => {
        reject(error);
      };
      this.#server.once('error', failed);
      this.#server.listen(port, '127.0.0.1', () => {
        this.#server.off('error', failed);
        resolve();
      });
    });
    this.#port = (this.#server.address() as AddressInfo).port;
    this.#listening = true;
  }

  #receive(request: IncomingMessage, response: ServerResponse): void {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    request.on('end', () => {
      const rawBody = size <= MAX_BODY_BYTES ? Buffer.concat(chunks).toString('utf8') : '';
      this.#answer(request, response, rawBody, size);
    });
  }

  #answer(request: IncomingMessage, response: ServerResponse, rawBody: string, size: number): void {
    const method = request.method ?? '';
    const path = request.url ?? '';
    const body = parseJson(rawBody);
    const record = (answer: RecordedRequest['answer'], pushkeys: readonly string[] = []): void => {
      const at = Date.now();
      this.#count(at, answer, pushkeys, body);
      if (this.#recording === 'full')
        this.#requests.push({ at, method, path, headers: request.headers, rawBody, body, pushkeys, answer });
      for (const waiter of this.#waiters) waiter();
    };
    const refuse = (status: number, errcode: string, error: string): void => {
      record(status);
      sendJson(response, status, { errcode, error });
    };

    // The spec's answers for what is not a notify request at all.
    if (new URL(path, 'http://double').pathname !== NOTIFY_PATH) {
      refuse(404, 'M_UNRECOGNIZED', 'Unrecognized request');
      return;
    }
    if (method !== 'POST') {
      refuse(405, 'M_UNRECOGNIZED', 'Unrecognized method');
      return;
    }
    if (size > MAX_BODY_BYTES) {
      refuse(413, 'M_TOO_LARGE', `The body is over ${MAX_BODY_BYTES} bytes`);
      return;
    }
    if (body === undefined) {
      refuse(400, 'M_NOT_JSON', 'The body is not JSON');
      return;
    }
    const problem = notifyBodyProblem(body);
    if (problem !== undefined) {
      refuse(400, 'M_BAD_JSON', problem);
      return;
    }

    const pushkeys = devicesOf(body).map((device) => device.pushkey);
    const behaviour = this.#behaviourFor(pushkeys);
    const rejected = { rejected: pushkeys.filter((pushkey) => this.#rejected.has(pushkey)) };
    switch (behaviour.kind) {
      case 'answer':
        record(200, pushkeys);
        this.#later(behaviour.delayMs, () => {
          sendJson(response, 200, rejected);
        });
        return;
      case 'status': {
        record(behaviour.status, pushkeys);
        const headers = retryAfterHeader(behaviour.retryAfter);
        const fallback =
          behaviour.status >= 200 && behaviour.status < 300
            ? rejected
            : { errcode: 'M_UNKNOWN', error: `The push gateway double was told to answer ${behaviour.status}` };
        this.#later(behaviour.delayMs, () => {
          sendJson(response, behaviour.status, behaviour.body ?? fallback, headers);
        });
        return;
      }
      case 'redirect': {
        const status = behaviour.status ?? 302;
        record(status, pushkeys);
        this.#later(behaviour.delayMs, () => {
          if (!response.destroyed) response.writeHead(status, { Location: behaviour.location }).end();
        });
        return;
      }
      case 'hang':
        record('hang', pushkeys);
        return;
      case 'hold':
        record(200, pushkeys);
        this.#held.push(() => {
          sendJson(response, 200, rejected);
        });
        return;
      case 'reset':
        record('reset', pushkeys);
        this.#later(behaviour.delayMs, () => {
          this.#resetConnection(request);
        });
        return;
    }
  }

  #count(at: number, answer: RecordedRequest['answer'], pushkeys: readonly string[], body: unknown): void {
    this.#received += 1;
    const key = String(answer);
    this.#answers[key] = (this.#answers[key] ?? 0) + 1;
    this.#firstAt ??= at;
    this.#lastAt = at;
    if (answer !== 200) return;
    this.#devicesDelivered += pushkeys.length;
    const eventId = (body as { notification: { event_id?: string } }).notification.event_id ?? '';
    for (const pushkey of pushkeys) {
      const log = this.#deviceLog.get(pushkey);
      if (log === undefined) this.#deviceLog.set(pushkey, [{ eventId, at }]);
      else log.push({ eventId, at });
    }
  }

  /** The rule of the first device whose pushkey has one, else the rule for every request, else the default; counts it down. */
  #behaviourFor(pushkeys: readonly string[]): GatewayBehaviour {
    const key = pushkeys.find((pushkey) => this.#rules.has(pushkey)) ?? EVERY_REQUEST;
    const rule = this.#rules.get(key);
    if (rule === undefined) return { kind: 'answer' };
    rule.remaining -= 1;
    if (rule.remaining <= 0) this.#rules.delete(key);
    return rule.behaviour;
  }

  /** Runs `act` now or after `delayMs`; a delay still pending when the double goes down is dropped. */
  #later(delayMs: number | undefined, act: () => void): void {
    if (delayMs === undefined || delayMs <= 0) {
      act();
      return;
    }
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      act();
    }, delayMs);
    this.#timers.add(timer);
  }

  /**
   * A TCP reset of the request's connection. Under TLS the request's socket
   * is the TLS layer, which cannot send one: the raw TCP socket under it
   * (the same peer address and port) does.
   */
  #resetConnection(request: IncomingMessage): void {
    const { remoteAddress, remotePort } = request.socket;
    for (const socket of this.#sockets) {
      if (socket.remoteAddress === remoteAddress && socket.remotePort === remotePort && !socket.destroyed) {
        socket.resetAndDestroy();
      }
    }
  }
}
