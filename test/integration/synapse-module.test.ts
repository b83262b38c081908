import { randomUUID } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { PusherSetAction } from '../../src/pushers/pusher.js';
import { startCuttableLink, type CuttableLink } from '../faults/support/cuttable-link.js';
import { eventually } from '../support/eventually.js';
import { PushGatewayDouble } from '../support/push-gateway-double.js';
import { brokerUser, startDeliveringWorker, type DeliveringWorker } from './support/delivery-harness.js';
import { installIntoSynapse, startSynapse, synapseUnavailable, type SynapseServer } from './support/synapse-server.js';

/*
 * An unmodified Synapse 1.163.2 with the module of clients/python
 * (matrix_push_worker.synapse.PushWorkerModule, docs/synapse-module.md)
 * pushes through a worker of the pool: users set their pushers and rules
 * in the pool only, Synapse's own pushers table stays empty, and what
 * reaches the push gateway is what Synapse's push path would have sent.
 * The module reaches the broker through a relay the test can drop, so
 * that the shared broker never stops.
 */
const CLIENT_PACKAGE = fileURLToPath(new URL('../../clients/python', import.meta.url));
const WAIT_MS = 60_000;
const TIMEOUT = { timeout: 3 * WAIT_MS };
const unavailable = synapseUnavailable();
if (unavailable !== undefined) console.warn(`[synapse module] skipped: ${unavailable}`);

interface User {
  readonly name: string;
  readonly userId: string;
  readonly token: string;
  readonly deviceId: string;
}

describe.skipIf(unavailable !== undefined)('the Synapse module', () => {
  let worker: DeliveringWorker;
  let gateway: PushGatewayDouble;
  let link: CuttableLink;
  let synapse: SynapseServer;
  let admin: User;
  let alice: User;
  let bob: User;
  let carol: User;
  let dave: User;
  let team: string;
  let aliceAndDave: string;
  const sentByAlice: string[] = [];
  /** What beforeAll started, to stop even when it failed part way. */
  const stops: (() => Promise<void>)[] = [];

  const api = async (user: User, method: string, path: string, body?: unknown) =>
    synapse.request(user.token, method, path, body);
  const send = async (user: User, roomId: string, body: string): Promise<string> => {
    const path = `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/${randomUUID()}`;
    const { event_id } = (await api(user, 'PUT', path, { msgtype: 'm.text', body })) as { event_id: string };
    return event_id;
  };
  const membership = async (user: User, roomId: string, action: string, target: User): Promise<string> => {
    const path = `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/${action}`;
    await api(user, 'POST', path, { user_id: target.userId });
    return currentMembershipEvent(user, roomId, target);
  };
  const currentMembershipEvent = async (user: User, roomId: string, target: User): Promise<string> => {
    const path = `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/state`;
    const state = (await api(user, 'GET', path)) as { type: string; state_key: string; event_id: string }[];
    const event = state.find((each) => each.type === 'm.room.member' && each.state_key === target.userId);
    if (event === undefined) throw new Error(`no membership of ${target.userId}`);
    return event.event_id;
  };
  /** The event IDs a user's phone was pushed, in order (repeats kept). */
  const pushedTo = (user: User): string[] =>
    (gateway.deviceLog.get(`${user.name}-phone`) ?? []).map((delivery) => delivery.eventId);
  const metric = async (name: string): Promise<number> => {
    const text = await (await fetch(synapse.metricsUrl ?? '')).text();
    const line = text.split('\n').find((each) => each.startsWith(`${name} `));
    return line === undefined ? 0 : Number(line.split(' ')[1]);
  };
  const aPusher = (pushkey: string): PusherSetAction => ({
    kind: 'http',
    app_id: 'org.example.app',
    pushkey,
    app_display_name: 'App',
    device_display_name: pushkey,
    lang: 'en',
    data: { url: gateway.notifyUrl },
  });

  beforeAll(async () => {
    installIntoSynapse(CLIENT_PACKAGE);
    worker = await startDeliveringWorker();
    stops.push(async () => worker.close());
    gateway = await PushGatewayDouble.start();
    stops.push(async () => gateway.close());
    const broker = new URL(inject('amqpUrl'));
    link = await startCuttableLink({ host: broker.hostname, port: Number(broker.port === '' ? 5672 : broker.port) });
    stops.push(async () => link.close());
    const throughLink = new URL(broker);
    throughLink.host = link.address;
    synapse = await startSynapse(
      { kind: 'sqlite' },
      {
        modules: [
          {
            module: 'matrix_push_worker.synapse.PushWorkerModule',
            config: {
              amqp_url: throughLink.toString(),
              publisher_user_id: brokerUser(),
              queue: worker.config.amqp.queue,
              evaluate_queue: worker.config.evaluate.queue,
              deliver_queue: worker.config.delivery.queue,
            },
          },
        ],
        metrics: true,
        logLevels: { matrix_push_worker: 'INFO' },
        // As docs/synapse-module.md has it: Synapse's own pushers never start.
        settings: { pusher_instances: [] },
      },
    );
    stops.push(async () => synapse.stop());
    const user = async (name: string, isAdmin = false): Promise<User> => {
      const { userId, token } = await synapse.register(name, isAdmin);
      const { device_id } = (await synapse.request(token, 'GET', '/_matrix/client/v3/account/whoami')) as {
        device_id: string;
      };
      return { name, userId, token, deviceId: device_id };
    };
    admin = await user('admin', true);
    [alice, bob, carol, dave] = [await user('alice'), await user('bob'), await user('carol'), await user('dave')];
    // Pushers and rules live in the pool: set there, as the HTTP gateway would for the user's phone.
    for (const each of [alice, bob, carol, dave]) {
      await worker.client.getPushRules(each.userId);
      await worker.client.setPusher(each.userId, aPusher(`${each.name}-phone`), { deviceId: each.deviceId });
    }
    // Rules that would push every membership event, and for Alice everything: what the module leaves
    // out is then left out by the module, not by the default rules.
    const membershipRule = {
      conditions: [{ kind: 'event_match', key: 'type', pattern: 'm.room.member' }],
      actions: ['notify'],
    };
    for (const each of [bob, carol, dave])
      await worker.client.setPushRule(
        each.userId,
        { scope: 'global', kind: 'override', ruleId: 'members' },
        membershipRule,
      );
    await worker.client.setPushRule(
      alice.userId,
      { scope: 'global', kind: 'override', ruleId: 'everything' },
      { conditions: [], actions: ['notify'] },
    );
    ({ room_id: team } = (await api(alice, 'POST', '/_matrix/client/v3/createRoom', {
      preset: 'private_chat',
      name: 'Team',
      invite: [bob.userId],
    })) as { room_id: string });
    await api(bob, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(team)}`, {});
    ({ room_id: aliceAndDave } = (await api(alice, 'POST', '/_matrix/client/v3/createRoom', {
      preset: 'private_chat',
      invite: [dave.userId],
    })) as { room_id: string });
    await api(dave, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(aliceAndDave)}`, {});
  }, 900_000);

  afterAll(async () => {
    for (const stop of stops.reverse()) await stop();
  });

  const onFailure = async <T>(check: () => Promise<T>): Promise<T> =>
    check().catch((error: unknown) => {
      console.error(`Synapse's log:\n${synapse.logTail()}`);
      throw error;
    });

  it("pushes each of Alice's messages to Bob's phone, once, with what Synapse's pusher would send", TIMEOUT, async () =>
    onFailure(async () => {
      const sent = sentByAlice;
      for (let n = 1; n <= 5; n += 1) sent.push(await send(alice, team, `message ${String(n)}`));
      await eventually(() => {
        expect(pushedTo(bob).filter((id) => sent.includes(id))).toEqual(sent);
      }, WAIT_MS);
      const first = gateway.requests.find(
        (request) =>
          request.pushkeys.includes('bob-phone') &&
          (request.body as { notification: { event_id: string } }).notification.event_id === sent[0],
      );
      expect((first?.body as { notification: unknown }).notification).toMatchObject({
        event_id: sent[0],
        room_id: team,
        type: 'm.room.message',
        sender: alice.userId,
        sender_display_name: 'alice',
        room_name: 'Team',
        content: { msgtype: 'm.text', body: 'message 1' },
        prio: 'high',
        // Two members: the default rule for one-to-one rooms, which plays a sound.
        devices: [{ pushkey: 'bob-phone', tweaks: { sound: 'default' } }],
      });
    }),
  );

  it('never pushes the sender', TIMEOUT, async () =>
    onFailure(async () => {
      const fromBob = await send(bob, team, 'hello Alice');
      await eventually(() => {
        expect(pushedTo(alice)).toContain(fromBob);
      }, WAIT_MS);
      // Alice's rule pushes her everything: her own messages were left out before it was asked.
      expect(sentByAlice).toHaveLength(5);
      expect(pushedTo(alice).filter((id) => sentByAlice.includes(id))).toEqual([]);
      expect(pushedTo(bob)).not.toContain(fromBob);
    }),
  );

  it(
    'pushes a membership event to its target only, and a kick or ban only to a target who was joined',
    TIMEOUT,
    async () =>
      onFailure(async () => {
        const invite = await membership(alice, team, 'invite', carol);
        await api(carol, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(team)}`, {});
        const kick = await membership(alice, team, 'kick', carol);
        const ban = await membership(alice, team, 'ban', dave);
        const toBob = await send(alice, team, 'after the kick');
        const toDave = await send(alice, aliceAndDave, 'after the ban');
        await eventually(() => {
          expect(pushedTo(carol)).toEqual(expect.arrayContaining([invite, kick]));
          expect(pushedTo(bob)).toContain(toBob);
          expect(pushedTo(dave)).toContain(toDave);
        }, WAIT_MS);
        // One device's pushes come in publish order: had the module sent these, they were there first.
        expect(pushedTo(bob)).not.toEqual(expect.arrayContaining([invite]));
        expect(pushedTo(bob)).not.toEqual(expect.arrayContaining([kick]));
        expect(pushedTo(dave)).not.toEqual(expect.arrayContaining([ban]));
      }),
  );

  it('does not push a message to a member who ignores its sender', TIMEOUT, async () =>
    onFailure(async () => {
      await api(
        dave,
        'PUT',
        `/_matrix/client/v3/user/${encodeURIComponent(dave.userId)}/account_data/m.ignored_user_list`,
        {
          ignored_users: { [alice.userId]: {} },
        },
      );
      await worker.client.setPushRule(
        dave.userId,
        { scope: 'global', kind: 'override', ruleId: 'topics' },
        { conditions: [{ kind: 'event_match', key: 'type', pattern: 'm.room.topic' }], actions: ['notify'] },
      );
      const ignored = await send(alice, aliceAndDave, 'from someone Dave ignores');
      // A state event: an ignored sender's are still shown, so still pushed.
      const { event_id: topic } = (await api(
        alice,
        'PUT',
        `/_matrix/client/v3/rooms/${encodeURIComponent(aliceAndDave)}/state/m.room.topic`,
        { topic: 'still shown' },
      )) as { event_id: string };
      await eventually(() => {
        expect(pushedTo(dave)).toContain(topic);
      }, WAIT_MS);
      expect(pushedTo(dave)).not.toContain(ignored);
    }),
  );

  it('pushes a message sent while the broker is unreachable once it is back', TIMEOUT, async () =>
    onFailure(async () => {
      link.drop();
      const failuresBefore = await metric('matrix_push_worker_module_pool_unavailable_total');
      const during = await send(alice, team, 'while the broker is away');
      await eventually(async () => {
        expect(await metric('matrix_push_worker_module_pool_unavailable_total')).toBeGreaterThan(failuresBefore);
        expect(await metric('matrix_push_worker_module_pending_events')).toBe(1);
      }, WAIT_MS);
      expect(pushedTo(bob)).not.toContain(during);
      link.mend();
      await eventually(() => {
        expect(pushedTo(bob)).toContain(during);
      }, WAIT_MS);
      expect(await metric('matrix_push_worker_module_events_expired_total')).toBe(0);
    }),
  );

  it("removes the pushers of a device that logs out, and only that device's", TIMEOUT, async () =>
    onFailure(async () => {
      const tablet = await synapse.login(carol.name);
      await worker.client.setPusher(carol.userId, aPusher('carol-tablet'), { deviceId: tablet.deviceId });
      await api(carol, 'POST', '/_matrix/client/v3/logout', {});
      await eventually(async () => {
        const { pushers } = await worker.client.getPushers(carol.userId);
        expect(pushers.map((pusher) => pusher.pushkey)).toEqual(['carol-tablet']);
      }, WAIT_MS);
    }),
  );

  it("removes a deactivated user's pushers and push rules from the pool", TIMEOUT, async () =>
    onFailure(async () => {
      await api(admin, 'POST', `/_synapse/admin/v1/deactivate/${encodeURIComponent(bob.userId)}`, { erase: false });
      // The deactivation logs every device out first: its pushers may go before the rest.
      await eventually(async () => {
        expect((await worker.client.getPushers(bob.userId)).pushers).toEqual([]);
        const { global } = await worker.client.getPushRules(bob.userId);
        expect(global.override.map((rule) => rule.rule_id)).not.toContain('members');
      }, WAIT_MS);
    }),
  );

  it("leaves Synapse's own pushers table empty, and pushed every event once", () => {
    const db = new DatabaseSync(synapse.sqlitePath ?? '', { readOnly: true });
    try {
      expect(db.prepare('SELECT COUNT(*) AS n FROM pushers').get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }
    for (const each of [alice, bob, carol, dave]) {
      const pushed = pushedTo(each);
      expect(
        pushed.filter((id, index) => pushed.indexOf(id) !== index),
        each.name,
      ).toEqual([]);
    }
  });
});
