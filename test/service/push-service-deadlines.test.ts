import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MESSAGES } from '../../src/errors/error-catalogue.js';
import { DEFAULT_RULES_REVISION } from '../../src/push-rules/server-default-rules.js';
import type { Command } from '../../src/service/command.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import type { PushStore } from '../../src/store/push-store.js';
import type { AbandonReason } from '../../src/service/bounded-store.js';
import type { HandleOutcome } from '../../src/service/handle-outcome.js';
import { PushService, type PushServiceOptions } from '../../src/service/push-service.js';
import { ALICE, aConditionalRule, aPusherSetAction, aRuleset, overridesWithUserRules } from '../support/builders.js';
import { CONTRACT_KINDS } from '../support/expect-result.js';
import { DEFAULT_LIMITS } from '../support/default-config.js';
import { wrapStore } from '../support/store-doubles.js';

/**
 * A request's deadline (issue: a stalled store held requests past it): the
 * reply comes by the deadline, no store operation is started once it has
 * passed, and each one under way is given up when it comes. The clock and
 * the timers are vitest's fakes; the stores are object literals.
 */
const T0 = Date.UTC(2026, 0, 1);
const OPTIONS: PushServiceOptions = {
  maxWriteAttempts: 12,
  backoff: { baseMs: 0, maxMs: 0 },
  pusherPolicy: { allowInsecureGateways: false },
  limits: DEFAULT_LIMITS,
};
const DEADLINE_PASSED = {
  ok: false,
  error: { kind: 'Unavailable', ...CONTRACT_KINDS.Unavailable, error: MESSAGES.deadlinePassed },
};
const STORE_UNAVAILABLE = {
  ok: false,
  error: { kind: 'Unavailable', ...CONTRACT_KINDS.Unavailable, error: MESSAGES.storeUnavailable },
};

const MASTER = { scope: 'global', kind: 'override', ruleId: '.m.rule.master' } as const;
const MY_RULE = { scope: 'global', kind: 'override', ruleId: 'my.rule' } as const;
const pusher = (pushkey: string) => aPusherSetAction({ pushkey });

/** Every op, each on data where it goes its whole way (a rule to delete, a pusher to delete). */
const COMMANDS: readonly (readonly [string, Command])[] = [
  ['get_pushrules', { op: 'get_pushrules', userId: ALICE }],
  ['get_pushrule', { op: 'get_pushrule', userId: ALICE, address: MY_RULE }],
  ['get_pushrule_actions', { op: 'get_pushrule_actions', userId: ALICE, address: MY_RULE }],
  ['get_pushrule_enabled', { op: 'get_pushrule_enabled', userId: ALICE, address: MY_RULE }],
  [
    'set_pushrule',
    {
      op: 'set_pushrule',
      userId: ALICE,
      request: { ...MY_RULE, ruleId: 'new.rule', body: { actions: ['notify'], conditions: [] } },
    },
  ],
  ['delete_pushrule', { op: 'delete_pushrule', userId: ALICE, address: MY_RULE }],
  ['set_pushrule_actions', { op: 'set_pushrule_actions', userId: ALICE, address: MASTER, actions: ['notify'] }],
  ['set_pushrule_enabled', { op: 'set_pushrule_enabled', userId: ALICE, address: MASTER, enabled: true }],
  ['get_pushers', { op: 'get_pushers', userId: ALICE }],
  ['set_pusher (new)', { op: 'set_pusher', userId: ALICE, action: pusher('new-key'), deviceId: 'PHONE' }],
  [
    'set_pusher (delete)',
    { op: 'set_pusher', userId: ALICE, action: { app_id: 'org.example.app', pushkey: 'old-key', kind: null } },
  ],
  ['delete_pushers', { op: 'delete_pushers', userId: ALICE, devices: { all: true }, includeEmail: false }],
  ['delete_user_data', { op: 'delete_user_data', userId: ALICE }],
];

/** Alice with a rule of her own and a pusher. */
async function seeded(): Promise<InMemoryPushStore> {
  const store = new InMemoryPushStore();
  await store.savePushRules(
    ALICE,
    0,
    aRuleset({ override: overridesWithUserRules(aConditionalRule()) }),
    DEFAULT_RULES_REVISION,
  );
  const seed = new PushService(store, OPTIONS);
  await seed.handle({ op: 'set_pusher', userId: ALICE, action: pusher('old-key') });
  return store;
}

/**
 * `inner`, recording the name of every operation started, in order;
 * `onStart` runs as each one starts (to move the clock, or to stall it).
 */
function recording(
  inner: PushStore,
  onStart: (operation: string, index: number) => Promise<void> | void = () => undefined,
) {
  const started: string[] = [];
  const forward = wrapStore(inner) as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const store = Object.fromEntries(
    Object.entries(forward).map(([name, call]) => [
      name,
      async (...args: unknown[]) => {
        started.push(name);
        await onStart(name, started.length - 1);
        return call(...args);
      },
    ]),
  ) as unknown as PushStore;
  return { store, started };
}

function observed() {
  const abandoned: [string, AbandonReason][] = [];
  return {
    abandoned,
    observer: {
      storeOperationAbandoned: (operation: string, reason: AbandonReason) => void abandoned.push([operation, reason]),
    },
  };
}

const never = async (): Promise<never> => new Promise<never>(() => undefined);

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('PushService: nothing is started once the deadline has passed', () => {
  it.each(COMMANDS)(
    '%s: a deadline already passed → Unavailable, and not one store operation',
    async (_name, command) => {
      const { store, started } = recording(await seeded());
      const { abandoned, observer } = observed();
      const outcome = await new PushService(store, { ...OPTIONS, observer }).handle(command, {
        messageId: 'm-1',
        deadline: Date.now(),
      });
      expect(outcome).toMatchObject({ reply: DEADLINE_PASSED, deadlinePassed: true, conflicts: 0 });
      expect(outcome.cause).toMatch(/^the request's deadline had passed before \w+ was started$/);
      expect(started).toEqual([]);
      expect(abandoned).toEqual([[expect.any(String), 'not-started']]);
    },
  );

  it.each(COMMANDS)(
    '%s: the deadline passing during any of its operations → none after it is started',
    async (_name, command) => {
      // What the op does with time to spare.
      const reference = recording(await seeded());
      const served = await new PushService(reference.store, OPTIONS).handle(command, {
        messageId: 'm-1',
        deadline: T0 + 1000,
      });
      expect(served.reply.ok).toBe(true);
      const sequence = reference.started;
      expect(sequence.length).toBeGreaterThan(0);

      for (let slow = 0; slow < sequence.length; slow += 1) {
        vi.setSystemTime(T0);
        // Operation `slow` takes 2 s: the deadline passes while it is under way (its answer still comes).
        const { store, started } = recording(await seeded(), (_op, index) => {
          if (index === slow) vi.setSystemTime(Date.now() + 2000);
        });
        const outcome = await new PushService(store, OPTIONS).handle(command, {
          messageId: 'm-1',
          deadline: T0 + 1000,
        });
        expect(started).toEqual(sequence.slice(0, slow + 1));
        if (slow === sequence.length - 1) expect(outcome.reply).toEqual(served.reply);
        else expect(outcome).toMatchObject({ reply: DEADLINE_PASSED, deadlinePassed: true });
      }
    },
  );

  it('no compare-and-set round is started after the deadline: Unavailable for the deadline, not for the spent budget', async () => {
    const inner = await seeded();
    const { store, started } = recording(
      wrapStore(inner, {
        // Every save loses to another writer, and takes 400 ms.
        savePushRules: async () => {
          vi.setSystemTime(Date.now() + 400);
          return Promise.resolve({ saved: false });
        },
      }),
    );
    const command: Command = { op: 'set_pushrule_enabled', userId: ALICE, address: MASTER, enabled: true };
    const outcome = await new PushService(store, OPTIONS).handle(command, { messageId: 'm-1', deadline: T0 + 1000 });
    expect(outcome).toMatchObject({ reply: DEADLINE_PASSED, deadlinePassed: true });
    // Saves end at 400, 800, 1200 ms: the fourth round's load is not started.
    expect(started).toEqual([
      'loadPushRules',
      'savePushRules',
      'loadPushRules',
      'savePushRules',
      'loadPushRules',
      'savePushRules',
    ]);
  });
});

describe('PushService: a store that stalls is answered by the deadline', () => {
  const stalled = (): PushStore =>
    Object.fromEntries(
      Object.keys(wrapStore(new InMemoryPushStore())).map((name) => [name, never]),
    ) as unknown as PushStore;

  it.each<[string, number | undefined, number | undefined, number, object, AbandonReason]>([
    ['the deadline, with no operation timeout', 1000, undefined, 1000, DEADLINE_PASSED, 'deadline'],
    ['the time left, when it is shorter than the operation timeout', 1000, 4000, 1000, DEADLINE_PASSED, 'deadline'],
    ['the operation timeout, without a deadline', undefined, 500, 500, STORE_UNAVAILABLE, 'timeout'],
    ['the operation timeout, when it comes before the deadline', 5000, 500, 500, STORE_UNAVAILABLE, 'timeout'],
  ])('bounded by %s', async (_case, deadlineIn, operationTimeoutMs, answeredAt, reply, reason) => {
    for (const [, command] of COMMANDS) {
      vi.setSystemTime(T0);
      const { abandoned, observer } = observed();
      const service = new PushService(stalled(), { ...OPTIONS, operationTimeoutMs, observer });
      let outcome: HandleOutcome | undefined;
      void service
        .handle(command, { messageId: 'm-1', deadline: deadlineIn === undefined ? undefined : T0 + deadlineIn })
        .then((o) => {
          outcome = o;
        });
      await vi.advanceTimersByTimeAsync(answeredAt - 1);
      expect(outcome).toBeUndefined();
      await vi.advanceTimersByTimeAsync(1);
      expect(outcome?.reply).toEqual(reply);
      expect(abandoned).toEqual([[expect.any(String), reason]]);
      vi.clearAllTimers();
    }
  });

  it('a request queued behind a stalled one of the same user is answered at its own deadline, and never reaches the store', async () => {
    const inner = await seeded();
    let first = true;
    const { store, started } = recording(inner, async (operation) => {
      // The first write's read stalls; anything after it would be served.
      if (operation === 'loadPushRules' && first) {
        first = false;
        await never();
      }
    });
    const { abandoned, observer } = observed();
    const service = new PushService(store, { ...OPTIONS, observer });
    const outcomes: Record<string, HandleOutcome> = {};
    const send = (name: string, command: Command, deadlineIn: number) =>
      void service.handle(command, { messageId: name, deadline: T0 + deadlineIn }).then((o) => {
        outcomes[name] = o;
      });
    send('long', { op: 'set_pushrule_enabled', userId: ALICE, address: MASTER, enabled: false }, 3000);
    send('short', { op: 'set_pushrule_actions', userId: ALICE, address: MASTER, actions: ['notify'] }, 1000);

    await vi.advanceTimersByTimeAsync(1000);
    // Answered while still waiting for its turn.
    expect(outcomes['short']).toMatchObject({ reply: DEADLINE_PASSED, deadlinePassed: true });
    expect(outcomes['long']).toBeUndefined();
    await vi.advanceTimersByTimeAsync(2000);
    expect(outcomes['long']).toMatchObject({ reply: DEADLINE_PASSED, deadlinePassed: true });
    await vi.runAllTimersAsync();
    // Its turn came after its deadline: nothing of it was started, nothing written.
    expect(started).toEqual(['loadPushRules']);
    expect(abandoned).toEqual([
      ['loadPushRules', 'deadline'],
      ['loadPushRules', 'not-started'],
    ]);
    expect((await inner.loadPushRules(ALICE)).version).toBe(1);
  });

  it('without a deadline or an operation timeout, nothing is bounded (no timer is set)', async () => {
    const { store } = recording(await seeded());
    const outcome = await new PushService(store, OPTIONS).handle({ op: 'get_pushers', userId: ALICE });
    expect(outcome.reply.ok).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });
});
