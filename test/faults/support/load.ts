import { setTimeout as sleep } from 'node:timers/promises';
import { RpcTransportError } from '../../../src/client/rpc-errors.js';
import type { RpcClient } from '../../../src/client/rpc-client.js';
import type { Reply } from '../../../src/contract/reply.js';

export interface LoadRequest {
  readonly body: Record<string, unknown>;
  readonly messageId: string;
  readonly user: string;
}

/** What became of one request: its final reply or transport failure, and what was met on the way. */
export interface LoadOutcome {
  readonly request: LoadRequest;
  /** `ok`, an error kind, or a transport failure (`timeout`, `connection-lost`, …). */
  readonly outcome: string;
  /** Every failed attempt before the last, by outcome. */
  readonly failedAttempts: readonly string[];
  readonly sentAt: number;
  readonly doneAt: number;
  readonly timeoutMs: number;
}

export interface LoadOptions {
  readonly client: RpcClient;
  readonly concurrency: number;
  readonly next: (index: number) => LoadRequest;
  /** Keeps sending new requests while this says so. */
  readonly running: () => boolean;
  readonly timeoutMs: number;
  /** Retry with the same messageId after Unavailable or a transport failure, as a front would. */
  readonly retry: boolean;
  readonly retryDelayMs?: number;
  readonly maxAttempts?: number;
}

/**
 * A steady load: `concurrency` callers, each sending its next request when
 * the last one is done. With `retry`, a caller keeps one request until it
 * succeeds or is refused for good, the way a front retries a 503.
 */
export async function runLoad(options: LoadOptions): Promise<LoadOutcome[]> {
  const outcomes: LoadOutcome[] = [];
  let index = 0;
  await Promise.all(
    Array.from({ length: options.concurrency }, async () => {
      while (options.running()) {
        const request = options.next(index);
        index += 1;
        outcomes.push(await send(options, request));
      }
    }),
  );
  return outcomes;
}

async function send(options: LoadOptions, request: LoadRequest): Promise<LoadOutcome> {
  const sentAt = Date.now();
  const failedAttempts: string[] = [];
  for (let attempt = 1; ; attempt += 1) {
    let outcome: string;
    try {
      const reply: Reply = await options.client.request(request.body, {
        messageId: request.messageId,
        timeoutMs: options.timeoutMs,
      });
      outcome = reply.ok ? 'ok' : reply.error.kind;
    } catch (error) {
      if (!(error instanceof RpcTransportError)) throw error;
      outcome = error.reason;
    }
    const transient =
      outcome === 'Unavailable' ||
      outcome === 'timeout' ||
      outcome === 'connection-lost' ||
      outcome === 'refused' ||
      outcome === 'unroutable';
    if (outcome !== 'ok') {
      // A failure can come back without any I/O (a closed channel): let
      // timers and socket events run before the next attempt.
      await sleep(0);
    }
    if (outcome === 'ok' || !transient || !options.retry || attempt >= (options.maxAttempts ?? 200)) {
      return { request, outcome, failedAttempts, sentAt, doneAt: Date.now(), timeoutMs: options.timeoutMs };
    }
    failedAttempts.push(outcome);
    await sleep(options.retryDelayMs ?? 100);
  }
}

/** `{ok: 120, Unavailable: 3}` */
export function tally(values: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

/**
 * The fault tests' usual load: 8 callers writing a new room rule each
 * (`!<tag><i>:example.org`) for `users` in turn, with a `messageId` per
 * write, retried after a failure as a front would, with a 3 s deadline.
 */
export async function ruleWrites(
  client: RpcClient,
  users: readonly string[],
  tag: string,
  running: () => boolean,
): Promise<LoadOutcome[]> {
  return runLoad({
    client,
    concurrency: 8,
    timeoutMs: 3_000,
    retry: true,
    retryDelayMs: 100,
    running,
    next: (i) => {
      const user = users[i % users.length] ?? '';
      return {
        user,
        messageId: `${tag}-${i}`,
        body: {
          op: 'set_pushrule',
          user_id: user,
          scope: 'global',
          kind: 'room',
          rule_id: `!${tag}${i}:example.org`,
          rule: { actions: [] },
        },
      };
    },
  });
}
