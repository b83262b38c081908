import { describe, expect, it } from 'vitest';
import type { Command } from '../../src/service/command.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import { PushService } from '../../src/service/push-service.js';
import { ALICE } from '../support/builders.js';
import { OPTIONS, withDefaults } from '../support/push-service-world.js';
import { wrapStore } from '../support/store-doubles.js';

describe('PushService: a write redelivered with the same messageId is applied once', () => {
  const rule = (ruleId: string): Command => ({
    op: 'set_pushrule',
    userId: ALICE,
    request: { scope: 'global', kind: 'room', ruleId, body: { actions: ['notify'] } },
  });
  const address = (ruleId: string) => ({ scope: 'global', kind: 'room', ruleId }) as const;
  const userRoomRules = async (store: InMemoryPushStore) => {
    const outcome = await new PushService(store, OPTIONS).handle({ op: 'get_pushrules', userId: ALICE });
    return (outcome.reply as { body: { global: { room: { rule_id: string; enabled: boolean }[] } } }).body.global.room;
  };

  it.each([
    ['set_pushrule', rule('!a:x')],
    ['delete_pushrule', { op: 'delete_pushrule', userId: ALICE, address: address('!keep:x') } satisfies Command],
    [
      'set_pushrule_enabled',
      { op: 'set_pushrule_enabled', userId: ALICE, address: address('!keep:x'), enabled: false } satisfies Command,
    ],
    [
      'set_pushrule_actions',
      { op: 'set_pushrule_actions', userId: ALICE, address: address('!keep:x'), actions: [] } satisfies Command,
    ],
  ])(
    '%s: the second delivery gets the recorded reply, writes nothing, and announces the push rules again at the stored version',
    async (_op, command) => {
      const store = await withDefaults();
      const service = new PushService(store, OPTIONS);
      await service.handle(rule('!keep:x'));
      const first = await service.handle(command, { messageId: 'm-1' });
      const versionAfterFirst = (await store.loadPushRules(ALICE)).version;
      const second = await service.handle(command, { messageId: 'm-1' });
      expect(first.reply).toEqual({ ok: true, body: {} });
      // The first delivery's event may be the one lost (a crash or a lost connection before the broker confirmed it).
      expect(second).toEqual({
        reply: first.reply,
        conflicts: 0,
        replayed: true,
        changes: [{ user_id: ALICE, type: 'm.push_rules', version: versionAfterFirst }],
      });
      expect((await store.loadPushRules(ALICE)).version).toBe(versionAfterFirst);
    },
  );

  it('a redelivered delete answers {} again, not NotFound, even after the rule is re-created by another request', async () => {
    const store = await withDefaults();
    const service = new PushService(store, OPTIONS);
    await service.handle(rule('!r:x'));
    const remove: Command = { op: 'delete_pushrule', userId: ALICE, address: address('!r:x') };
    expect((await service.handle(remove, { messageId: 'del' })).reply).toEqual({ ok: true, body: {} });
    await service.handle(rule('!r:x'), { messageId: 'recreate' });
    expect((await service.handle(remove, { messageId: 'del' })).reply).toEqual({ ok: true, body: {} });
    expect((await userRoomRules(store)).map((r) => r.rule_id)).toEqual(['!r:x']);
  });

  it('a redelivered set_pushrule does not undo a change made since', async () => {
    const store = await withDefaults();
    const service = new PushService(store, OPTIONS);
    await service.handle(rule('!a:x'), { messageId: 'create' });
    await service.handle({ op: 'set_pushrule_actions', userId: ALICE, address: address('!a:x'), actions: [] });
    await service.handle(rule('!a:x'), { messageId: 'create' });
    expect(await userRoomRules(store)).toMatchObject([{ rule_id: '!a:x', actions: [] }]);
  });

  it('a replayed refusal announces nothing', async () => {
    const store = await withDefaults();
    const service = new PushService(store, OPTIONS);
    const remove: Command = { op: 'delete_pushrule', userId: ALICE, address: address('!missing:x') };
    // Refusals are not recorded, so this is judged again: still refused, still nothing to announce.
    expect((await service.handle(remove, { messageId: 'r' })).changes).toBeUndefined();
    expect((await service.handle(remove, { messageId: 'r' })).changes).toBeUndefined();
  });

  it('a refused write is not recorded: its redelivery is judged again', async () => {
    const store = await withDefaults();
    const service = new PushService(store, OPTIONS);
    const remove: Command = { op: 'delete_pushrule', userId: ALICE, address: address('!later:x') };
    expect((await service.handle(remove, { messageId: 'd' })).reply).toMatchObject({
      ok: false,
      error: { kind: 'NotFound' },
    });
    await service.handle(rule('!later:x'));
    expect((await service.handle(remove, { messageId: 'd' })).reply).toEqual({ ok: true, body: {} });
  });

  it('requests without a messageId, or with different ones, are each applied', async () => {
    const store = await withDefaults();
    const service = new PushService(store, OPTIONS);
    const toggle = (enabled: boolean): Command => ({
      op: 'set_pushrule_enabled',
      userId: ALICE,
      address: address('!t:x'),
      enabled,
    });
    await service.handle(rule('!t:x'));
    const before = (await store.loadPushRules(ALICE)).version;
    // Each one a change (the same value twice would change nothing the second time).
    await service.handle(toggle(false));
    await service.handle(toggle(true));
    await service.handle(toggle(false), { messageId: 'a' });
    await service.handle(toggle(true), { messageId: 'b' });
    expect((await store.loadPushRules(ALICE)).version).toBe(before + 4);
  });

  it('a conflict lost to a copy of the same request ends in the recorded reply, not a second write', async () => {
    const store = await withDefaults();
    const command = rule('!dup:x');
    let raced = false;
    const racingCopy = wrapStore(store, {
      savePushRules: async (u, version, ruleset, revision, record) => {
        if (!raced) {
          raced = true;
          // Another worker applies the redelivered copy first.
          await new PushService(store, OPTIONS).handle(command, { messageId: 'same' });
        }
        return store.savePushRules(u, version, ruleset, revision, record);
      },
    });
    const outcome = await new PushService(racingCopy, OPTIONS).handle(command, { messageId: 'same' });
    const { version } = await store.loadPushRules(ALICE);
    expect(outcome).toEqual({
      reply: { ok: true, body: {} },
      conflicts: 1,
      replayed: true,
      changes: [{ user_id: ALICE, type: 'm.push_rules', version }],
    });
    expect((await userRoomRules(store)).map((r) => r.rule_id)).toEqual(['!dup:x']);
  });

  it('set_pusher: a redelivery is answered from the record, does not re-apply, and announces the pushers again at their version now', async () => {
    const store = new InMemoryPushStore();
    const service = new PushService(store, OPTIONS);
    const setPusher = (lang: string): Command => ({
      op: 'set_pusher',
      userId: ALICE,
      action: {
        kind: 'http',
        app_id: 'a',
        pushkey: 'k',
        app_display_name: 'A',
        device_display_name: 'D',
        lang,
        data: { url: 'https://push.example.org/_matrix/push/v1/notify' },
      },
    });
    const first = await service.handle(setPusher('en'), { messageId: 'p1' });
    expect(first.changes?.[0]).toMatchObject({ type: 'm.pushers', version: 1 });
    await service.handle(setPusher('de'), { messageId: 'p2' });
    const replay = await service.handle(setPusher('en'), { messageId: 'p1' });
    // Its first event may have been lost with a worker or a broker node: a spare one costs a re-read.
    expect(replay).toEqual({
      reply: { ok: true, body: {} },
      conflicts: 0,
      replayed: true,
      changes: [{ user_id: ALICE, type: 'm.pushers', version: 2 }],
    });
    expect((await store.listPushers(ALICE)).map((p) => p.lang)).toEqual(['de']);
  });

  it('set_pusher: a delete that changed nothing is still recorded, and announced', async () => {
    const store = new InMemoryPushStore();
    const service = new PushService(store, OPTIONS);
    const remove: Command = { op: 'set_pusher', userId: ALICE, action: { kind: null, app_id: 'a', pushkey: 'k' } };
    const announced = [{ user_id: ALICE, type: 'm.pushers', version: 0 }];
    // It may be the retry of a delete whose record failed after the pusher went.
    expect((await service.handle(remove, { messageId: 'gone' })).changes).toEqual(announced);
    expect(await store.findRecordedWrite(ALICE, 'gone')).toEqual({
      messageId: 'gone',
      replyJson: '{"ok":true,"body":{}}',
      pushersVersion: 0,
    });
    // Recorded as a change: its replay announces again, in case the first event was lost.
    expect((await service.handle(remove, { messageId: 'gone' })).changes).toEqual(announced);
  });
});
