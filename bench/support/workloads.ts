import { randomUUID } from 'node:crypto';
import type { PushRulesClient } from '../../src/client/push-rules-client.js';
import type { RpcClient } from '../../src/client/rpc-client.js';
import type { ConditionalPushRule, Ruleset } from '../../src/push-rules/push-rule.js';
import type { PusherSetAction } from '../../src/pushers/pusher.js';
import { DEFAULT_RULES_REVISION, serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import type { Db } from 'mongodb';
import type { AccountDataDocument } from '../../src/store/account-data-document.js';
import type { MongoPushStore } from '../../src/store/mongo-push-store.js';
import { encodePushRulesContent } from '../../src/store/push-rules-entry.js';

/** One request of a closed loop: caller `lane`, its `i`th request. */
export type Call = (lane: number, i: number) => Promise<unknown>;

/** The users a scenario spreads its requests over. */
export class UserPool {
  readonly ids: readonly string[];

  constructor(prefix: string, count: number) {
    this.ids = Array.from({ length: count }, (_, k) => `@${prefix}-${k}:bench.example.org`);
  }

  /**
   * With at least as many users as lanes, each lane cycles through users of
   * its own (`lane`, `lane + concurrency`, ...), so no two requests in
   * flight are for the same user and writes never conflict. With fewer
   * users, lanes share them: that is what the small pools measure.
   */
  pick(lane: number, i: number, concurrency: number): string {
    const count = this.ids.length;
    if (count < concurrency) return this.ids[(lane + i) % count] ?? '';
    const perLane = Math.floor(count / concurrency);
    return this.ids[lane + concurrency * (i % perLane)] ?? '';
  }
}

const SUPPRESS_NOTICES = { scope: 'global', kind: 'override', ruleId: '.m.rule.suppress_notices' } as const;
const RULE_ADDRESS = { scope: 'global', kind: 'override', ruleId: 'bench.keywords' } as const;
const GATEWAY = 'https://push.bench.example.org/_matrix/push/v1/notify';
const RECORDED_REPLY = '{"ok":true,"body":{}}';

/** A user rule of the kind most clients create: a keyword in the body. */
export function keywordRule(n: number): ConditionalPushRule {
  return {
    rule_id: `bench.keyword.${n}`,
    default: false,
    enabled: true,
    conditions: [{ kind: 'event_match', key: 'content.body', pattern: `keyword${n}` }],
    actions: ['notify', { set_tweak: 'sound', value: 'default' }],
  };
}

/** The server defaults with `userRules` keyword rules below the master rule. */
export function rulesetWithUserRules(userId: string, userRules: number): Ruleset {
  const defaults = serverDefaultRuleset(userId);
  const [master, ...rest] = defaults.override;
  if (master === undefined || userRules === 0) return defaults;
  return { ...defaults, override: [master, ...Array.from({ length: userRules }, (_, n) => keywordRule(n)), ...rest] };
}

/**
 * The one pusher each user has; sets replace it. The pushkey is the user's
 * own: a set without `append` deletes the pushers of other users with the
 * same app ID and pushkey, as the spec says.
 */
function storedPusher(user: string, device: string) {
  return {
    pushkey: `pushkey-${user}`,
    kind: 'http',
    app_id: 'org.example.bench',
    app_display_name: 'Bench',
    device_display_name: device,
    lang: 'en',
    data: { url: GATEWAY, format: 'event_id_only' },
  } as const;
}

export const pusherOf = (user: string, device: string): PusherSetAction => storedPusher(user, device);

/** Stores each user's ruleset (with `userRules` of their own) and one pusher, as a worker would have. */
export async function seedUsers(store: MongoPushStore, users: UserPool, userRules = 0): Promise<void> {
  const ids = [...users.ids];
  const seeder = async () => {
    for (let user = ids.pop(); user !== undefined; user = ids.pop()) {
      await store.savePushRules(user, 0, rulesetWithUserRules(user, userRules), DEFAULT_RULES_REVISION);
      await store.upsertPusher({ ...storedPusher(user, 'Phone'), enabled: true, user_id: user });
    }
  };
  await Promise.all(Array.from({ length: 32 }, seeder));
}

/**
 * The how-many-th write of `op` to `user` in this benchmark run (from 0).
 * Writes derive their value from it, so that each write of a user changes
 * what the one before it stored: an identical write is answered without
 * writing anything (no version bump, no change event), and a workload that
 * repeated a value would measure those no-ops instead of writes. Values
 * taken from the request counter did repeat (with an even number of users
 * per caller, a user always got the same parity).
 */
const writeCounts = new Map<string, number>();
export function nextWrite(op: 'set_pushrule_enabled' | 'set_pushrule' | 'set_pusher', user: string): number {
  const key = `${op} ${user}`;
  const n = writeCounts.get(key) ?? 0;
  writeCounts.set(key, n + 1);
  return n;
}

/**
 * The worker operations the benchmark drives, through the typed client.
 * Every write changes the stored data (see `nextWrite`); reads go to the
 * read queue when the client has one.
 */
export const WORKER_OPS = {
  get_pushrules: async (client: PushRulesClient, user: string) => client.getPushRules(user),
  get_pushrule: async (client: PushRulesClient, user: string) => client.getPushRule(user, SUPPRESS_NOTICES),
  get_pushrule_actions: async (client: PushRulesClient, user: string) =>
    client.getPushRuleActions(user, SUPPRESS_NOTICES),
  get_pushrule_enabled: async (client: PushRulesClient, user: string) =>
    client.getPushRuleEnabled(user, SUPPRESS_NOTICES),
  // The seeded value is false: the first write sets true.
  set_pushrule_enabled: async (client: PushRulesClient, user: string) =>
    client.setPushRuleEnabled(user, SUPPRESS_NOTICES, nextWrite('set_pushrule_enabled', user) % 2 === 0),
  set_pushrule: async (client: PushRulesClient, user: string) =>
    client.setPushRule(user, RULE_ADDRESS, {
      conditions: [
        { kind: 'event_match', key: 'content.body', pattern: `word${nextWrite('set_pushrule', user) % 10}` },
      ],
      actions: ['notify'],
    }),
  get_pushers: async (client: PushRulesClient, user: string) => client.getPushers(user),
  // The seeded device name is 'Phone': every write names another.
  set_pusher: async (client: PushRulesClient, user: string) =>
    client.setPusher(user, pusherOf(user, `Phone ${nextWrite('set_pusher', user) % 10}`)),
} satisfies Record<string, (client: PushRulesClient, user: string) => Promise<unknown>>;

export type WorkerOp = keyof typeof WORKER_OPS;
export const READ_OPS: readonly WorkerOp[] = [
  'get_pushrules',
  'get_pushrule',
  'get_pushrule_actions',
  'get_pushrule_enabled',
  'get_pushers',
];
export const WRITE_OPS: readonly WorkerOp[] = ['set_pushrule_enabled', 'set_pushrule', 'set_pusher'];

export function workerCall(client: PushRulesClient, users: UserPool, op: WorkerOp, concurrency: number): Call {
  const run = WORKER_OPS[op];
  return async (lane, i) => run(client, users.pick(lane, i, concurrency));
}

/**
 * 90% reads, 10% writes: per ten requests of a caller, 4 `get_pushrules`,
 * 4 `get_pushrule_enabled`, 1 `get_pushers` and 1 write, alternating
 * between `set_pushrule_enabled` and `set_pushrule`.
 */
export function mixedCall(client: PushRulesClient, users: UserPool, concurrency: number): Call {
  const plan: readonly WorkerOp[] = [
    'get_pushrules',
    'get_pushrule_enabled',
    'get_pushrules',
    'get_pushrule_enabled',
    'get_pushers',
  ];
  return async (lane, i) => {
    const user = users.pick(lane, i, concurrency);
    const slot = i % 10;
    if (slot === 9) return (i % 20 === 9 ? WORKER_OPS.set_pushrule_enabled : WORKER_OPS.set_pushrule)(client, user);
    return WORKER_OPS[plan[slot % plan.length] ?? 'get_pushrules'](client, user);
  };
}

/** The broker baseline: the same RPC client, an echo consumer behind the queue. */
export function echoCall(client: RpcClient): Call {
  const body = { op: 'get_pushers', user_id: '@echo:bench.example.org' };
  return async () => {
    const reply = await client.request(body);
    if (!reply.ok) throw new Error('echo failed');
  };
}

/**
 * The store baselines: the worker's own database calls for each kind of
 * operation, through the same adapter and driver, with no broker and no
 * domain logic. Writes are as the worker makes them with a `messageId`.
 */
export const STORE_OPS = {
  /** `get_pushrules`, `get_pushrule_enabled`: one read of the account-data document. */
  'rules-read': async (store: MongoPushStore, user: string) => store.loadPushRules(user),
  /** Rule writes: the read with the recorded-writes window, then the compare-and-set. */
  'rules-write': async (store: MongoPushStore, user: string) => {
    const messageId = randomUUID();
    const loaded = await store.loadPushRules(user, messageId);
    const saved = await store.savePushRules(user, loaded.version, { ...rulesetOf(user) }, DEFAULT_RULES_REVISION, {
      messageId,
      replyJson: RECORDED_REPLY,
    });
    if (!saved.saved) throw new Error('conflict');
  },
  /** `get_pushers`. */
  'pushers-read': async (store: MongoPushStore, user: string) => store.listPushers(user),
  /**
   * `set_pusher` replacing a pusher without `append`: replay check, count
   * check, upsert, removal of the same pusher from other users, version bump
   * with the record.
   */
  'pushers-write': async (store: MongoPushStore, user: string, i: number) => {
    const messageId = randomUUID();
    const pusher = storedPusher(user, `Phone ${i % 10}`);
    await store.findRecordedWrite(user, messageId);
    await store.listPushers(user);
    await store.upsertPusher({ ...pusher, enabled: true, user_id: user });
    await store.deletePushersOfOtherUsers({ userId: user, appId: pusher.app_id, pushkey: pusher.pushkey });
    await store.bumpPushersVersion(user, { messageId, replyJson: RECORDED_REPLY });
  },
} satisfies Record<string, (store: MongoPushStore, user: string, i: number) => Promise<unknown>>;

export type StoreOp = keyof typeof STORE_OPS;

/** Which store baseline bounds each worker operation. */
export const STORE_OP_OF: Record<WorkerOp, StoreOp> = {
  get_pushrules: 'rules-read',
  get_pushrule: 'rules-read',
  get_pushrule_actions: 'rules-read',
  get_pushrule_enabled: 'rules-read',
  set_pushrule_enabled: 'rules-write',
  set_pushrule: 'rules-write',
  get_pushers: 'pushers-read',
  set_pusher: 'pushers-write',
};

export function storeCall(store: MongoPushStore, users: UserPool, op: StoreOp, concurrency: number): Call {
  const run = STORE_OPS[op];
  return async (lane, i) => run(store, users.pick(lane, i, concurrency), i);
}

/**
 * The user's defaults, built once. Each write passes a fresh copy: the store
 * caches a ruleset's JSON text per object, and the worker writes a new
 * ruleset object every time, so the baseline pays for the encoding too.
 */
const rulesets = new Map<string, Ruleset>();
function rulesetOf(user: string): Ruleset {
  let ruleset = rulesets.get(user);
  if (ruleset === undefined) {
    ruleset = serverDefaultRuleset(user);
    rulesets.set(user, ruleset);
  }
  return ruleset;
}

/**
 * Stores each user's ruleset as `savePushRules` would on a first write
 * (version 1, the content as JSON text, the defaults' revision), in bulk:
 * seeding 10,000 users one compare-and-set at a time takes the stand-in
 * most of a minute.
 */
export async function seedRulesetDocuments(
  db: Db,
  userIds: readonly string[],
  rulesetOf: (userId: string) => Ruleset = serverDefaultRuleset,
): Promise<void> {
  const collection = db.collection<AccountDataDocument>('account_data');
  for (let start = 0; start < userIds.length; start += 500) {
    await collection.insertMany(
      userIds.slice(start, start + 500).map((userId) => ({
        _id: userId,
        version: 1,
        push_rules: {
          content_json: encodePushRulesContent(rulesetOf(userId)),
          defaults_revision: DEFAULT_RULES_REVISION,
        },
      })),
    );
  }
}
