import { describe, expect, it } from 'vitest';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { PushService } from '../../src/service/push-service.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import { ALICE } from '../support/builders.js';
import { OPTIONS } from '../support/push-service-world.js';
import { BOB, emailAction, setPusher, setup } from '../support/pusher-devices-world.js';
import { wrapStore } from '../support/store-doubles.js';

// The homeserver's deactivation of a user: push rules and every pusher erased.

describe('delete_user_data', () => {
  async function withData() {
    const world = setup();
    await world.run({ op: 'get_pushrules', userId: ALICE });
    await world.run({
      op: 'set_pushrule',
      userId: ALICE,
      request: { scope: 'global', kind: 'room', ruleId: '!r:example.org', body: { actions: [] } },
    });
    await world.run(setPusher('phone', 'PHONE'));
    await world.run({ op: 'set_pusher', userId: ALICE, action: emailAction('alice@example.org') });
    await world.run(setPusher('bobs', 'PHONE', {}, BOB));
    return world;
  }

  it('erases push rules and every pusher, announcing both with versions past the old ones', async () => {
    const { run, pushkeys } = await withData();
    const outcome = await run({ op: 'delete_user_data', userId: ALICE }, 'deactivate');
    expect(outcome.reply).toEqual({ ok: true, body: {} });
    expect(outcome.changes).toEqual([
      { user_id: ALICE, type: 'm.push_rules', version: 3 },
      { user_id: ALICE, type: 'm.pushers', version: 3 },
    ]);
    expect(await pushkeys()).toEqual([]);
    expect(await pushkeys(BOB)).toEqual(['bobs']);
  });

  it('afterwards the user reads as one who never had data, and the next versions go on growing', async () => {
    const { run } = await withData();
    await run({ op: 'delete_user_data', userId: ALICE });
    const address = { scope: 'global', kind: 'room', ruleId: '!r:example.org' };
    expect((await run({ op: 'get_pushrule', userId: ALICE, address })).reply).toMatchObject({
      ok: false,
      error: { kind: 'NotFound', error: 'PushRules event not found.' },
    });
    const read = await run({ op: 'get_pushrules', userId: ALICE });
    expect(read.reply).toEqual({ ok: true, body: { global: serverDefaultRuleset(ALICE) } });
    // Stored again as a new user's defaults are, at the next version (not 1).
    expect(read.changes?.[0]).toEqual({ user_id: ALICE, type: 'm.push_rules', version: 4 });
    expect((await run(setPusher('k', 'PHONE'))).changes?.[0]).toEqual({
      user_id: ALICE,
      type: 'm.pushers',
      version: 4,
    });
  });

  it('a retry with the same messageId replays {} and erases nothing made since', async () => {
    const { run, pushkeys } = await withData();
    const first = await run({ op: 'delete_user_data', userId: ALICE }, 'deactivate');
    await run(setPusher('new', 'PHONE'));
    const retry = await run({ op: 'delete_user_data', userId: ALICE }, 'deactivate');
    // It erased both: both are announced again at the versions now (another worker may still keep the rules).
    expect(retry).toEqual({
      reply: first.reply,
      conflicts: 0,
      replayed: true,
      changes: [
        { user_id: ALICE, type: 'm.push_rules', version: 3 },
        { user_id: ALICE, type: 'm.pushers', version: 4 },
      ],
    });
    expect(await pushkeys()).toEqual(['new']);
  });

  it('a copy of it that recorded first while it deleted (a redelivery beside it): replays, announcing both', async () => {
    const { store, run } = await withData();
    await run({ op: 'delete_user_data', userId: ALICE }, 'deactivate');
    let finds = 0;
    // The first look for the record comes before the copy has written it.
    const late = wrapStore(store, {
      findRecordedWrite: async (userId, messageId) =>
        (finds += 1) === 1 ? undefined : store.findRecordedWrite(userId, messageId),
    });
    const outcome = await new PushService(late, OPTIONS).handle(
      { op: 'delete_user_data', userId: ALICE },
      { messageId: 'deactivate' },
    );
    expect(outcome).toEqual({
      reply: { ok: true, body: {} },
      conflicts: 0,
      replayed: true,
      changes: [
        { user_id: ALICE, type: 'm.push_rules', version: 3 },
        { user_id: ALICE, type: 'm.pushers', version: 3 },
      ],
    });
  });

  it('for a user without data: {} and no change event; with a messageId, a record a retry replays', async () => {
    const { store, run } = setup();
    expect(await run({ op: 'delete_user_data', userId: ALICE })).toEqual({
      reply: { ok: true, body: {} },
      conflicts: 0,
      unchanged: true,
    });
    expect(await run({ op: 'delete_user_data', userId: ALICE }, 'm')).toEqual({
      reply: { ok: true, body: {} },
      conflicts: 0,
      unchanged: true,
    });
    expect(await run({ op: 'delete_user_data', userId: ALICE }, 'm')).toMatchObject({ replayed: true });
    expect(await store.loadPushRules(ALICE)).toEqual({ version: 0, lookup: { found: false } });
  });

  it('only pushers, or only rules: announces what changed', async () => {
    const rulesOnly = setup();
    await rulesOnly.run({ op: 'get_pushrules', userId: ALICE });
    expect((await rulesOnly.run({ op: 'delete_user_data', userId: ALICE })).changes).toEqual([
      { user_id: ALICE, type: 'm.push_rules', version: 2 },
    ]);
    const pushersOnly = setup();
    await pushersOnly.run(setPusher('k'));
    expect((await pushersOnly.run({ op: 'delete_user_data', userId: ALICE })).changes).toEqual([
      { user_id: ALICE, type: 'm.pushers', version: 2 },
    ]);
  });

  it('erases a corrupt push-rules entry too', async () => {
    const { store, run } = setup();
    store.putRawPushRules(ALICE, { contentJson: '{corrupt', defaultsRevision: 'v1.19' });
    expect((await run({ op: 'delete_user_data', userId: ALICE })).reply).toEqual({ ok: true, body: {} });
    expect(await store.loadPushRules(ALICE)).toEqual({ version: 2, lookup: { found: false } });
  });

  it('retries when another writer changes the push rules between its read and its erase', async () => {
    const store = new InMemoryPushStore();
    const base = new PushService(store, OPTIONS);
    await base.handle({ op: 'get_pushrules', userId: ALICE });
    let raced = false;
    const racing = wrapStore(store, {
      eraseUserData: async (u, v, erasure) => {
        if (!raced) {
          raced = true;
          await base.handle({
            op: 'set_pushrule_enabled',
            userId: ALICE,
            address: { scope: 'global', kind: 'override', ruleId: '.m.rule.master' },
            enabled: true,
          });
        }
        return store.eraseUserData(u, v, erasure);
      },
    });
    const outcome = await new PushService(racing, OPTIONS).handle({ op: 'delete_user_data', userId: ALICE });
    expect(outcome).toMatchObject({
      reply: { ok: true },
      conflicts: 1,
      changes: [{ type: 'm.push_rules', version: 3 }],
    });
    expect((await store.loadPushRules(ALICE)).lookup).toEqual({ found: false });
  });
});
