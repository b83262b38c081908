import type { SynapseServer } from './synapse-server.js';

/** A user of the scenario: who they are in Synapse, and their token. */
export interface ScenarioUser {
  readonly userId: string;
  readonly token: string;
}

export interface Scenario {
  readonly users: readonly ScenarioUser[];
  /** The user who changed a default rule that only Synapse serves (reported as skipped). */
  readonly synapseOnly: ScenarioUser;
  /** A user left to change settings after the first import (the cut-over window). */
  readonly late: ScenarioUser;
}

const GATEWAY = 'https://push.example.org/_matrix/push/v1/notify';

function rulePath(kind: string, ruleId: string, query: Record<string, string> = {}): string {
  const search = new URLSearchParams(query).toString();
  return `/_matrix/client/v3/pushrules/global/${kind}/${encodeURIComponent(ruleId)}${search === '' ? '' : `?${search}`}`;
}

/**
 * Users who set rules of every kind through Synapse's client API, with
 * `before` / `after`, disable and re-enable defaults, change default
 * actions, set HTTP and e-mail pushers, and delete some of each.
 */
export async function populateSynapse(synapse: SynapseServer): Promise<Scenario> {
  const admin = await synapse.register('admin', true);
  const put = async (user: ScenarioUser, path: string, body: unknown) => synapse.request(user.token, 'PUT', path, body);
  const del = async (user: ScenarioUser, path: string) => synapse.request(user.token, 'DELETE', path);
  const pusher = async (user: ScenarioUser, body: Record<string, unknown>) =>
    synapse.request(user.token, 'POST', '/_matrix/client/v3/pushers/set', body);
  const s = synapse.serverName;

  // Every kind of rule, placed with before and after, one disabled, one deleted.
  const alice = await synapse.register('alice');
  const match = (pattern: string) => [{ kind: 'event_match', key: 'content.body', pattern }];
  await put(alice, rulePath('override', 'o1'), { conditions: match('cake'), actions: ['notify'] });
  await put(alice, rulePath('override', 'o2', { before: 'o1' }), {
    conditions: match('pie'),
    actions: ['notify', { set_tweak: 'sound', value: 'default' }],
  });
  await put(alice, rulePath('override', 'o3', { after: 'o1' }), {
    conditions: [{ kind: 'event_property_is', key: 'content.m\\.relates_to.rel_type', value: 'm.thread' }],
    actions: [],
  });
  await put(alice, rulePath('override', 'gone'), { conditions: match('x'), actions: ['notify'] });
  await del(alice, rulePath('override', 'gone'));
  await put(alice, `${rulePath('override', 'o1')}/enabled`, { enabled: false });
  await put(alice, rulePath('content', 'c1'), { pattern: 'hello', actions: ['notify', { set_tweak: 'highlight' }] });
  await put(alice, rulePath('content', 'c2', { before: 'c1' }), { pattern: 'wor?d', actions: ['notify'] });
  await put(alice, rulePath('room', `!quiet:${s}`), { actions: [] });
  await put(alice, rulePath('room', `!loud:${s}`), { actions: ['notify', { set_tweak: 'sound', value: 'ping' }] });
  await put(alice, rulePath('sender', `@boss:${s}`), { actions: ['notify', { set_tweak: 'highlight', value: true }] });
  await put(alice, rulePath('underride', 'u1'), {
    conditions: [{ kind: 'room_member_count', is: '2' }],
    actions: ['notify'],
  });
  await put(alice, rulePath('underride', 'u2', { after: 'u1' }), {
    conditions: [{ kind: 'event_match', key: 'type', pattern: 'm.room.message' }, { kind: 'contains_display_name' }],
    actions: ['notify', { set_tweak: 'x.custom', value: { a: [1, 2] } }],
  });

  // Server-default rules: disabled, re-enabled, actions changed.
  const bob = await synapse.register('bob');
  await put(bob, `${rulePath('override', '.m.rule.suppress_notices')}/enabled`, { enabled: false });
  await put(bob, `${rulePath('override', '.m.rule.invite_for_me')}/enabled`, { enabled: false });
  await put(bob, `${rulePath('override', '.m.rule.invite_for_me')}/enabled`, { enabled: true });
  await put(bob, `${rulePath('underride', '.m.rule.message')}/actions`, { actions: [] });
  await put(bob, `${rulePath('underride', '.m.rule.encrypted')}/actions`, {
    actions: ['notify', { set_tweak: 'sound', value: 'x' }],
  });
  await put(bob, `${rulePath('override', '.m.rule.master')}/enabled`, { enabled: true });
  await put(bob, rulePath('sender', `@alice:${s}`), { actions: ['notify'] });

  // Pushers: HTTP ones, an e-mail one, one deleted.
  const carol = await synapse.register('carol');
  const httpPusher = (pushkey: string, data: Record<string, unknown>) => ({
    kind: 'http',
    app_id: 'org.example.app',
    pushkey,
    app_display_name: 'Example',
    device_display_name: `Phone ${pushkey}`,
    lang: 'en',
    data: { url: GATEWAY, ...data },
  });
  await pusher(carol, httpPusher('key-1', { format: 'event_id_only' }));
  await pusher(carol, { ...httpPusher('key-2', { 'org.example.custom': { nested: true } }), profile_tag: 'work' });
  await pusher(carol, httpPusher('key-3', {}));
  await pusher(carol, { kind: null, app_id: 'org.example.app', pushkey: 'key-3' });
  await synapse.request(admin.token, 'PUT', `/_synapse/admin/v2/users/${encodeURIComponent(carol.userId)}`, {
    threepids: [{ medium: 'email', address: 'carol@example.org' }],
  });
  await pusher(carol, {
    kind: 'email',
    app_id: 'm.email',
    pushkey: 'carol@example.org',
    app_display_name: 'Email',
    device_display_name: 'carol@example.org',
    lang: 'en',
    data: {},
  });
  await put(carol, rulePath('content', 'carol'), { pattern: 'carol', actions: ['notify'] });

  // A user Synapse knows with nothing set: the defaults on both sides.
  const dave = await synapse.register('dave');

  // A default rule only Synapse serves, changed: reported, not imported.
  const erin = await synapse.register('erin');
  await put(erin, `${rulePath('override', '.m.rule.roomnotif')}/actions`, { actions: [] });
  await put(erin, rulePath('override', 'kept'), { conditions: [], actions: ['notify'] });

  // Changes settings after the first import.
  const frank = await synapse.register('frank');
  await put(frank, rulePath('override', 'before-cutover'), { conditions: match('a'), actions: ['notify'] });
  await pusher(frank, httpPusher('frank-1', {}));

  return { users: [alice, bob, carol, dave, erin, frank], synapseOnly: erin, late: frank };
}

/** What `late` changes in Synapse between the first import and the switch to the service. */
export async function changeLateUser(synapse: SynapseServer, late: ScenarioUser): Promise<void> {
  await synapse.request(late.token, 'DELETE', rulePath('override', 'before-cutover'));
  await synapse.request(late.token, 'PUT', rulePath('override', 'after-cutover'), {
    conditions: [],
    actions: ['notify'],
  });
  await synapse.request(late.token, 'POST', '/_matrix/client/v3/pushers/set', {
    kind: null,
    app_id: 'org.example.app',
    pushkey: 'frank-1',
  });
}
