import { describe, expect, it } from 'vitest';
import type { RuleAddress } from '../../src/push-rules/rule-address.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import type { RawPusherSetAction } from '../../src/pushers/decide-pusher-set.js';
import type { Command } from '../../src/service/command.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import type { PushStore } from '../../src/store/push-store.js';
import { PushService, type PushServiceOptions } from '../../src/service/push-service.js';
import { ALICE } from '../support/builders.js';
import { DEFAULT_LIMITS } from '../support/default-config.js';
import { wrapStore } from '../support/store-doubles.js';

/**
 * A write that changes nothing (clients repeat the same PUT) must not store
 * anything, bump a version or announce a change; with a messageId it is
 * still recorded, so that a retry after a later change does not apply it.
 */
const OPTIONS: PushServiceOptions = {
  maxWriteAttempts: 4,
  backoff: { baseMs: 0, maxMs: 0 },
  pusherPolicy: { allowInsecureGateways: false },
  limits: DEFAULT_LIMITS,
};
const BOB = '@bob:example.org';
const ROOM = '!r:example.org';
const OTHER_ROOM = '!s:example.org';
const address = (ruleId = ROOM): RuleAddress => ({ scope: 'global', kind: 'room', ruleId });
const pusherAction = (overrides: Partial<RawPusherSetAction> = {}): RawPusherSetAction => ({
  kind: 'http',
  app_id: 'org.example.app',
  pushkey: 'key-1',
  app_display_name: 'App',
  device_display_name: 'Phone',
  lang: 'en',
  data: { url: 'https://push.example.org/_matrix/push/v1/notify', format: 'event_id_only' },
  ...overrides,
});
const setRule = (
  actions: readonly string[],
  placement: { before?: string; after?: string } = {},
  ruleId = ROOM,
): Command => ({
  op: 'set_pushrule',
  userId: ALICE,
  request: { scope: 'global', kind: 'room', ruleId, body: { actions }, ...placement },
});

/** Each op twice: as a repeat of what is stored, and as a change. */
const OPS: readonly { readonly op: string; readonly same: Command; readonly change: Command }[] = [
  { op: 'set_pushrule', same: setRule(['notify']), change: setRule([]) },
  {
    op: 'set_pushrule_actions',
    same: { op: 'set_pushrule_actions', userId: ALICE, address: address(), actions: ['notify'] },
    change: { op: 'set_pushrule_actions', userId: ALICE, address: address(), actions: [] },
  },
  {
    op: 'set_pushrule_enabled',
    same: { op: 'set_pushrule_enabled', userId: ALICE, address: address(), enabled: true },
    change: { op: 'set_pushrule_enabled', userId: ALICE, address: address(), enabled: false },
  },
  {
    op: 'set_pusher',
    same: { op: 'set_pusher', userId: ALICE, action: pusherAction() },
    change: { op: 'set_pusher', userId: ALICE, action: pusherAction({ lang: 'de' }) },
  },
];

/**
 * What reached the store: writes that changed something (by the store's own
 * account), and records written without any change.
 */
function counting(inner: PushStore) {
  const writes: string[] = [];
  const records: string[] = [];
  const store = wrapStore(inner, {
    savePushRules: async (u, v, r, d, record) => {
      const saved = await inner.savePushRules(u, v, r, d, record);
      if (saved.saved) writes.push('savePushRules');
      return saved;
    },
    insertPushRulesIfAbsent: async (u, r, d) => {
      const inserted = await inner.insertPushRulesIfAbsent(u, r, d);
      if (inserted.saved) writes.push('insertPushRulesIfAbsent');
      return inserted;
    },
    upsertPusher: async (p) => {
      const effect = await inner.upsertPusher(p);
      if (effect !== 'unchanged') writes.push('upsertPusher');
      return effect;
    },
    deletePusher: async (k) => {
      const deleted = await inner.deletePusher(k);
      if (deleted) writes.push('deletePusher');
      return deleted;
    },
    deletePushersOfOtherUsers: async (k) => {
      const removed = await inner.deletePushersOfOtherUsers(k);
      if (removed.length > 0) writes.push('deletePushersOfOtherUsers');
      return removed;
    },
    bumpPushersVersion: async (u, record) => {
      writes.push('bumpPushersVersion');
      return inner.bumpPushersVersion(u, record);
    },
    recordWrite: async (u, record) => {
      records.push(record.messageId);
      return inner.recordWrite(u, record);
    },
    recordWriteAtVersion: async (u, v, record) => {
      const recorded = await inner.recordWriteAtVersion(u, v, record);
      if (recorded) records.push(record.messageId);
      return recorded;
    },
  });
  return { store, writes, records };
}

/** Alice with the server defaults, a room rule `!r` (enabled, `notify`) and a pusher. */
async function aliceWithRuleAndPusher(): Promise<InMemoryPushStore> {
  const store = new InMemoryPushStore();
  await store.savePushRules(ALICE, 0, serverDefaultRuleset(ALICE), 'v1.19');
  const service = new PushService(store, OPTIONS);
  for (const command of [
    setRule(['notify']),
    { op: 'set_pusher', userId: ALICE, action: pusherAction() } satisfies Command,
  ]) {
    expect((await service.handle(command)).changes).toHaveLength(1);
  }
  return store;
}

async function roomRules(store: PushStore) {
  const outcome = await new PushService(store, OPTIONS).handle({ op: 'get_pushrules', userId: ALICE });
  return (outcome.reply as { body: { global: { room: { rule_id: string; enabled: boolean; actions: unknown[] }[] } } })
    .body.global.room;
}

describe('PushService: a write that changes nothing', () => {
  it.each(OPS)(
    '$op with what is stored: {} and nothing written, no version bump, no change event',
    async ({ same }) => {
      const inner = await aliceWithRuleAndPusher();
      const { store, writes, records } = counting(inner);
      const version = (await inner.loadPushRules(ALICE)).version;
      const pushers = await inner.listPushers(ALICE);

      const outcome = await new PushService(store, OPTIONS).handle(same);

      expect(outcome).toEqual({ reply: { ok: true, body: {} }, conflicts: 0, unchanged: true });
      expect(writes).toEqual([]);
      expect(records).toEqual([]);
      expect((await inner.loadPushRules(ALICE)).version).toBe(version);
      expect(await inner.listPushers(ALICE)).toEqual(pushers);
    },
  );

  it.each(OPS)('$op with a change still writes once and announces it', async ({ op, change }) => {
    const inner = await aliceWithRuleAndPusher();
    const { store, writes } = counting(inner);
    const outcome = await new PushService(store, OPTIONS).handle(change);
    expect(outcome.reply).toEqual({ ok: true, body: {} });
    expect(outcome.unchanged).toBeUndefined();
    expect(outcome.changes?.[0]).toMatchObject(
      op === 'set_pusher' ? { type: 'm.pushers', version: 2 } : { type: 'm.push_rules', version: 3 },
    );
    expect(writes).toEqual(op === 'set_pusher' ? ['upsertPusher', 'bumpPushersVersion'] : ['savePushRules']);
  });

  it.each(OPS)(
    '$op with what is stored and a messageId: only the record is written, and a retry replays it',
    async ({ op, same }) => {
      const inner = await aliceWithRuleAndPusher();
      const { store, writes, records } = counting(inner);
      const service = new PushService(store, OPTIONS);
      const version = (await inner.loadPushRules(ALICE)).version;
      // A pusher write with a messageId and no record of it may be the retry
      // of one whose change landed while its record did not: it announces its
      // user at the pushers version stored now, bumping nothing, and is
      // recorded as a change (see pusher-writes.ts, pushersWritten).
      const announced = op === 'set_pusher' ? { changes: [{ user_id: ALICE, type: 'm.pushers', version: 1 }] } : {};
      expect(await service.handle(same, { messageId: 'm-same' })).toEqual({
        reply: { ok: true, body: {} },
        conflicts: 0,
        unchanged: true,
        ...announced,
      });
      expect(writes).toEqual([]);
      expect(records).toEqual(['m-same']);
      expect((await inner.loadPushRules(ALICE)).version).toBe(version);
      // Answered from its record, announcing again only what the record says changed.
      expect(await service.handle(same, { messageId: 'm-same' })).toEqual({
        reply: { ok: true, body: {} },
        conflicts: 0,
        replayed: true,
        ...announced,
      });
    },
  );

  it.each(OPS)(
    '$op: a retry of a recorded no-op after another client changed the value does not undo that change',
    async ({ op, same, change }) => {
      const inner = await aliceWithRuleAndPusher();
      const service = new PushService(inner, OPTIONS);
      await service.handle(same, { messageId: 'first' });
      await service.handle(change);
      const version = (await inner.loadPushRules(ALICE)).version;
      const pushers = await inner.listPushers(ALICE);

      expect(await service.handle(same, { messageId: 'first' })).toMatchObject({ replayed: true });

      expect((await inner.loadPushRules(ALICE)).version).toBe(version);
      expect(await inner.listPushers(ALICE)).toEqual(pushers);
      if (op !== 'set_pusher')
        expect((await roomRules(inner))[0]).toMatchObject(
          op === 'set_pushrule_enabled' ? { enabled: false } : { actions: [] },
        );
    },
  );

  it('a no-op whose record loses the compare-and-set is judged again on what is stored now', async () => {
    const inner = await aliceWithRuleAndPusher();
    let raced = false;
    const racing = wrapStore(inner, {
      recordWriteAtVersion: async (u, version, record) => {
        if (!raced) {
          raced = true;
          // Another worker disables the rule after this request read it enabled.
          await new PushService(inner, OPTIONS).handle({
            op: 'set_pushrule_enabled',
            userId: ALICE,
            address: address(),
            enabled: false,
          });
        }
        return inner.recordWriteAtVersion(u, version, record);
      },
    });
    const enable: Command = { op: 'set_pushrule_enabled', userId: ALICE, address: address(), enabled: true };
    const outcome = await new PushService(racing, OPTIONS).handle(enable, { messageId: 'late' });
    // Ordered after the other writer, it is a change now.
    expect(outcome).toMatchObject({
      reply: { ok: true, body: {} },
      conflicts: 1,
      changes: [{ type: 'm.push_rules', version: 4 }],
    });
    expect((await roomRules(inner))[0]).toMatchObject({ enabled: true });
    expect(await inner.findRecordedWrite(ALICE, 'late')).toBeDefined();
  });

  it('set_pushrule with before/after: landing the rule where it is changes nothing, moving it does', async () => {
    const inner = await aliceWithRuleAndPusher();
    const service = new PushService(inner, OPTIONS);
    await service.handle(setRule(['notify'], {}, OTHER_ROOM));
    // New rules go first: !s, then !r.
    expect((await roomRules(inner)).map((r) => r.rule_id).slice(0, 2)).toEqual([OTHER_ROOM, ROOM]);
    expect(await service.handle(setRule(['notify'], { after: OTHER_ROOM }))).toMatchObject({ unchanged: true });
    expect(await service.handle(setRule(['notify'], { before: ROOM }, OTHER_ROOM))).toMatchObject({ unchanged: true });
    expect((await service.handle(setRule(['notify'], { before: OTHER_ROOM }))).changes).toHaveLength(1);
    expect((await roomRules(inner)).map((r) => r.rule_id).slice(0, 2)).toEqual([ROOM, OTHER_ROOM]);
  });

  it('set_pushrule of a disabled rule with its own body changes nothing: it stays disabled', async () => {
    const inner = await aliceWithRuleAndPusher();
    const service = new PushService(inner, OPTIONS);
    await service.handle(OPS[2]?.change ?? setRule([]));
    expect(await service.handle(setRule(['notify']))).toMatchObject({ unchanged: true });
    expect((await roomRules(inner))[0]).toMatchObject({ rule_id: ROOM, enabled: false });
  });

  it('a no-op on a ruleset stored under older server defaults still writes: it stores the upgrade', async () => {
    const inner = await aliceWithRuleAndPusher();
    const loaded = await inner.loadPushRules(ALICE);
    const content = loaded.lookup.found === true ? loaded.lookup.event : undefined;
    inner.putRawPushRules(ALICE, {
      contentJson: JSON.stringify((content as { content: unknown }).content),
      defaultsRevision: 'v1.4',
    });
    const outcome = await new PushService(inner, OPTIONS).handle(OPS[2]?.same ?? setRule(['notify']));
    expect(outcome.changes?.[0]).toMatchObject({ type: 'm.push_rules' });
    expect((await inner.loadPushRules(ALICE)).lookup).toMatchObject({ defaultsRevision: 'v1.19' });
  });

  it("set_pusher with the stored values and append: false still removes another user's pusher with the same key, announcing that user only", async () => {
    const inner = await aliceWithRuleAndPusher();
    await new PushService(inner, OPTIONS).handle({
      op: 'set_pusher',
      userId: BOB,
      action: pusherAction({ append: true }),
    });
    const outcome = await new PushService(inner, OPTIONS).handle({
      op: 'set_pusher',
      userId: ALICE,
      action: pusherAction(),
    });
    expect(outcome).toEqual({
      reply: { ok: true, body: {} },
      conflicts: 0,
      unchanged: true,
      changes: [{ user_id: BOB, type: 'm.pushers', version: 2 }],
    });
    expect(await inner.listPushers(BOB)).toEqual([]);
    expect(await inner.listPushers(ALICE)).toHaveLength(1);
  });
});
