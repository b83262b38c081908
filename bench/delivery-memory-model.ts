/**
 * What the worker's delivery state holds through a gateway outage, without
 * broker or database (issue 42, flat memory): the intake plan, the journal
 * and the scheduler of a build's `dist/` (this checkout's, or another's to
 * compare), 2,000 devices, `notify` messages each to all of them, the
 * gateway answering 503. Prints the heap held per waiting request after
 * full collections, and the heap and RSS peaks through the intake.
 *
 *   node --expose-gc --max-semi-space-size=8 --heap-growing-percent=50 \
 *     --import tsx bench/delivery-memory-model.ts [dist dir] [notifies]
 *
 * The worker's own flags (`npm start`, `runtime.heapGrowingPercent`). The
 * store keeps nothing (the database is another process), but the journal's
 * writes encode each body as the real store does.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as IntakePlan from '../src/delivery/intake-plan.js';
import type * as Journal from '../src/delivery-service/delivery-journal.js';
import type * as Scheduler from '../src/delivery-service/delivery-scheduler.js';
import type * as Retry from '../src/delivery/retry-schedule.js';
import type * as Breaker from '../src/delivery/circuit-breaker.js';
import type * as Backlog from '../src/delivery/device-backlog.js';
import type * as Logging from '../src/logging/logger.js';
import type { StoredPusher } from '../src/pushers/pusher.js';
import type { DeliveryPusher } from '../src/delivery/device-batches.js';

const dist = resolve(process.argv[2] ?? 'dist');
const notifies = Number(process.argv[3] ?? 60);
const USERS = 2000;
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with node --expose-gc');

const load = async <T>(path: string): Promise<T> => (await import(pathToFileURL(`${dist}/${path}`).href)) as T;
const { planIntake } = await load<typeof IntakePlan>('delivery/intake-plan.js');
const { DeliveryJournal } = await load<typeof Journal>('delivery-service/delivery-journal.js');
const { DeliveryScheduler } = await load<typeof Scheduler>('delivery-service/delivery-scheduler.js');
const { DEFAULT_RETRY_POLICY } = await load<typeof Retry>('delivery/retry-schedule.js');
const { DEFAULT_BREAKER_POLICY } = await load<typeof Breaker>('delivery/circuit-breaker.js');
const { DEFAULT_BACKLOG_POLICY, DEFAULT_AGE_POLICY } = await load<typeof Backlog>('delivery/device-backlog.js');
const { createLogger } = await load<typeof Logging>('logging/logger.js');

const logger = createLogger('silent');
const userIds = Array.from({ length: USERS }, (_, i) => `@o-${String(i)}:bench.example.org`);
/** The pusher cache: one pusher per user, as bench/support/delivery-seed.ts stores them. */
const cache = new Map<string, StoredPusher>(
  userIds.map((user_id, i) => [
    user_id,
    {
      user_id,
      kind: 'http',
      app_id: 'org.example.bench',
      pushkey: `pk-o-${String(i)}-0`,
      app_display_name: 'Bench',
      device_display_name: 'Bench',
      lang: 'en',
      data: { url: 'https://gateway.example.org/_matrix/push/v1/notify' },
      enabled: true,
    },
  ]),
);
const pusherOf = (userId: string): StoredPusher => {
  const pusher = cache.get(userId);
  if (pusher === undefined) throw new Error(`no pusher for ${userId}`);
  return pusher;
};
/**
 * As the build's intake makes them: one per stored pusher (delivery-pusher-of.ts), or, in a build from
 * before it, one per pusher per message (notify-intake.ts's own copy then).
 */
const ofBuild = await load<{ deliveryPusherOf?: (pusher: StoredPusher) => DeliveryPusher }>(
  'delivery/delivery-pusher-of.js',
).catch(() => ({ deliveryPusherOf: undefined }));
const toDeliveryPusher =
  ofBuild.deliveryPusherOf ??
  ((pusher: StoredPusher): DeliveryPusher => ({
    user_id: pusher.user_id,
    kind: pusher.kind,
    app_id: pusher.app_id,
    pushkey: pusher.pushkey,
    data: pusher.data,
    enabled: pusher.enabled,
    pushkeyTsMs: pusher.ts ?? 0,
  }));
/** The bench's notification to every user, as text: each message is parsed afresh, as the intake does. */
const wire = (k: number) =>
  JSON.stringify({
    op: 'notify',
    notification: {
      event_id: `$o${String(k)}`,
      room_id: '!bench:bench.example.org',
      type: 'm.room.message',
      sender: '@sender:bench.example.org',
      sender_display_name: 'Sender',
      room_name: 'Bench',
      content: { msgtype: 'm.text', body: 'hello' },
    },
    recipients: userIds.map((user_id) => ({ user_id, actions: ['notify'], counts: { unread: 1 } })),
  });

let written = 0;
const encode = (body: unknown): string =>
  typeof body === 'string' ? body : (body as { encodeBody(): string }).encodeBody();
const store = {
  acceptAll: async (_notifies: readonly unknown[], deliveries: readonly object[]) => {
    await Promise.resolve();
    written += deliveries.length;
    // The text a real store writes: `bodyJson` before issue 42's change, `body` after.
    for (const delivery of deliveries as readonly { bodyJson?: unknown; body?: unknown }[])
      encode(delivery.bodyJson ?? delivery.body);
  },
  remove: async () => Promise.resolve(),
  saveRetry: async () => Promise.resolve(),
  markDone: async () => Promise.resolve(),
};
let requests = 0;
const journal = new DeliveryJournal({ store, writable: () => true, persistAfterMs: 5000, logger });
const scheduler = new DeliveryScheduler({
  store: journal,
  gate: { sendable: () => true },
  sender: {
    send: async () => {
      await Promise.resolve();
      requests += 1;
      return { kind: 'response', status: 503 };
    },
  },
  pushers: {
    listPushers: async (userId) => Promise.resolve([pusherOf(userId)]),
    listPushersOfUsers: async (ids) => Promise.resolve(new Map(ids.map((id) => [id, [pusherOf(id)]]))),
  },
  remover: { removeRejected: async () => Promise.resolve() },
  retry: DEFAULT_RETRY_POLICY,
  backlog: DEFAULT_BACKLOG_POLICY,
  age: DEFAULT_AGE_POLICY,
  breaker: DEFAULT_BREAKER_POLICY,
  logger,
});
journal.start();

gc();
gc();
const base = process.memoryUsage().heapUsed;
const peak = { heapTotal: 0, rss: 0 };
for (let k = 0; k < notifies; k += 1) {
  const request = JSON.parse(wire(k)) as Parameters<typeof planIntake>[0];
  const acceptedAt = Date.now();
  const plan = planIntake(request, (userId) => [toDeliveryPusher(pusherOf(userId))], {
    notifyId: `n${String(k)}`,
    partition: 0,
    seq: k + 1,
    acceptedAt,
  });
  const deliveries = plan.deliveries as unknown as Parameters<typeof scheduler.hold>[0];
  journal
    .admit(0, { id: `n${String(k)}`, recipients: USERS, devices: USERS, acceptedAt }, deliveries)
    .catch(() => undefined);
  scheduler.hold(deliveries, acceptedAt);
  await sleep(20);
  const usage = process.memoryUsage();
  peak.heapTotal = Math.max(peak.heapTotal, usage.heapTotal);
  peak.rss = Math.max(peak.rss, usage.rss);
}
// Past `persistAfterMs`: what waits is stored, as in an outage.
await sleep(8000);
gc();
gc();
const usage = process.memoryUsage();
const held = scheduler.pending;
const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
console.log(
  `${dist}: ${String(notifies)} notifies × ${String(USERS)} devices; ${String(held)} requests held, ${String(written)} written to the store, ${String(requests)} reached the gateway; heap held ${mb(usage.heapUsed - base)} = ${String(Math.round((usage.heapUsed - base) / held))} B per waiting request; heapTotal peak ${mb(peak.heapTotal)}; RSS peak ${mb(peak.rss)}`,
);
process.exit(0);
