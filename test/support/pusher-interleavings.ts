import type { Command } from '../../src/service/command.js';
import type { PushStore } from '../../src/store/push-store.js';
import { PushService, type PushServiceOptions } from '../../src/service/push-service.js';
import { wrapStore } from './store-doubles.js';

/**
 * Runs two requests for the same user against one store, in every way they
 * can interleave at the store's port: `outer` runs on a store that, just
 * before its n-th call, lets `inner` run to the end (on another service,
 * as another worker would), for every n until `outer` makes no n-th call;
 * then the same with the roles swapped. Both orders run one after the
 * other too. Each run starts from a fresh store.
 *
 * Nothing finer can interleave: each store call is one atomic step of the
 * adapter. What a run leaves is read with `snapshot`.
 */
export interface InterleavingRun {
  /** `sequential` for the two plain orders; else which request was interrupted and before which of its store calls. */
  readonly label: string;
  readonly state: unknown;
}

export async function allInterleavings(options: {
  readonly fresh: () => Promise<PushStore>;
  readonly service: PushServiceOptions;
  readonly first: Command;
  readonly second: Command;
  readonly snapshot: (store: PushStore) => Promise<unknown>;
}): Promise<{ readonly sequential: readonly unknown[]; readonly interleaved: readonly InterleavingRun[] }> {
  const { fresh, service, first, second, snapshot } = options;
  const sequential: unknown[] = [];
  for (const [a, b] of [
    [first, second],
    [second, first],
  ] as const) {
    const store = await fresh();
    await new PushService(store, service).handle(a);
    await new PushService(store, service).handle(b);
    sequential.push(await snapshot(store));
  }
  const interleaved: InterleavingRun[] = [];
  for (const [outer, inner, name] of [
    [first, second, 'first'],
    [second, first, 'second'],
  ] as const) {
    for (let gap = 0; ; gap += 1) {
      const store = await fresh();
      const progress = { calls: 0, ran: false };
      const before = async (method: string): Promise<void> => {
        if (progress.calls === gap && !progress.ran) {
          progress.ran = true;
          const reply = await new PushService(store, service).handle(inner);
          if (!reply.reply.ok)
            throw new Error(`the inner request failed before ${method}: ${JSON.stringify(reply.reply)}`);
        }
        progress.calls += 1;
      };
      const interrupted = interruptible(store, before);
      const outcome = await new PushService(interrupted, service).handle(outer);
      if (!outcome.reply.ok) throw new Error(`the outer request failed: ${JSON.stringify(outcome.reply)}`);
      if (!progress.ran) break;
      interleaved.push({ label: `${name} request, before its store call #${gap}`, state: await snapshot(store) });
    }
  }
  return { sequential, interleaved };
}

/** `store` with `before(method)` awaited ahead of every call. */
function interruptible(store: PushStore, before: (method: string) => Promise<void>): PushStore {
  const plain = wrapStore(store);
  const wrapped: Record<string, unknown> = {};
  for (const [method, call] of Object.entries(plain) as [string, (...args: unknown[]) => Promise<unknown>][]) {
    wrapped[method] = async (...args: unknown[]) => {
      await before(method);
      return call(...args);
    };
  }
  return wrapped as unknown as PushStore;
}
