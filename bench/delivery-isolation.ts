/**
 * The read queue's isolation from delivery (bench/README.md, "Delivery"):
 * `get_pushrules` latency alone, then while 10k fan-outs are delivered.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from 'mongodb';
import type { PushRulesClient } from '../src/client/push-rules-client.js';
import { loadConfig } from '../src/config/load-config.js';
import { benchRecipients, type DeliveryAudience } from './support/delivery-seed.js';
import { summarize, type IsolationResult } from './support/delivery-report.js';
import type { DeliveryContext } from './support/delivery-context.js';
import type { GatewayFleet } from './support/gateway-fleet.js';
import { fanOut } from './delivery-fanout.js';

const ISOLATION_FANOUTS = 3;
/** Users whose rules the stored-rules loop reads (stored before it, so each of its reads is a read). */
const STORED_USERS = 200;
/** The users the first-write loop stores (`@…:bench-probe`): none of the audience's, deleted after the row. */
const PROBE_SERVER = 'bench-probe';
const DEFAULTS = loadConfig();

/** One timed read: when it started and ended (ms since the epoch), and why it failed. */
interface Sample {
  readonly start: number;
  readonly end: number;
  readonly error?: string;
}

const log = (line: string) => {
  console.error(line);
};

/**
 * `get_pushrules` at c = 1 on the read queue: alone, then while 10k
 * fan-outs are delivered one after the other. Only requests that started
 * after a notify was published and ended before its last device was
 * received count as "during". The judged loop goes through the fan-out's
 * users, who have no stored rules: each read is a user's first, which
 * stores the default rules and waits for its change event's confirm.
 *
 * Three loops beside it, each in a phase of its own (at rest, then during
 * one more fan-out), judge nothing and say where the time goes: reads of
 * users whose rules are stored (the worker's read cache answers them: the
 * request path alone), the same users' documents read straight from the
 * database by the bench (`findOne` by `_id`), and the judged read's own
 * write made by the bench alone: a stored user's rules upserted for a user
 * with no rules yet, with the filter the worker's first read uses (`_id`
 * and `push_rules` absent). That filter is not one of the MongoDB stand-in's
 * unique indexes, so there it scans the collection, one operation on the
 * collection at a time, on the cores the fan-out uses; MongoDB uses `_id`'s.
 */
export async function isolation(
  client: PushRulesClient,
  audience: DeliveryAudience,
  fleet: GatewayFleet,
  db: Db,
  ctx: DeliveryContext,
): Promise<IsolationResult> {
  const recipients = benchRecipients(audience.userIds);
  const accountData = db.collection<{ _id: string }>(DEFAULTS.mongodb.accountDataCollection);
  // The judged loop walks the users from the first; these, from the end, it does not reach.
  const storedUsers = audience.userIds.slice(-STORED_USERS);
  for (let at = 0; at < storedUsers.length; at += 16)
    await Promise.all(storedUsers.slice(at, at + 16).map(async (user) => client.getPushRules(user)));
  const firstReads = async (i: number) => client.getPushRules(audience.userIds[i % audience.userIds.length] ?? '');
  const storedReads = async (i: number) => client.getPushRules(storedUsers[i % storedUsers.length] ?? '');
  const databaseReads = async (i: number) => accountData.findOne({ _id: storedUsers[i % storedUsers.length] ?? '' });
  const stored = await accountData.findOne<{ push_rules?: unknown }>(
    { _id: storedUsers[0] ?? '' },
    { projection: { push_rules: 1 } },
  );
  if (stored === null) throw new Error('delivery/isolation: the stored users were not stored');
  const probes = { written: 0 };
  const databaseFirstWrites = async () =>
    accountData.findOneAndUpdate(
      { _id: `@probe${(probes.written += 1)}:${PROBE_SERVER}`, push_rules: { $exists: false } },
      { $set: { push_rules: stored.push_rules }, $inc: { version: 1 } },
      { upsert: true, returnDocument: 'after', projection: { version: 1 } },
    );
  const timed = (untilMs: number, read: (i: number) => Promise<unknown>) => {
    const samples: Sample[] = [];
    const state = { stop: false };
    const loop = (async () => {
      for (let i = 0; !state.stop && Date.now() < untilMs; i += 1) {
        const start = performance.timeOrigin + performance.now();
        // A failed read counts, as slow as it took: a read that fails while delivery runs is the isolation failing.
        const error = await read(i).then(
          () => undefined,
          (failure: unknown) => (failure instanceof Error ? failure.message : String(failure)),
        );
        samples.push({
          start,
          end: performance.timeOrigin + performance.now(),
          ...(error === undefined ? {} : { error }),
        });
      }
    })();
    return { samples, stop: async () => ((state.stop = true), loop) };
  };
  const atRest = async (read: (i: number) => Promise<unknown>, what: string) => {
    const loop = timed(Date.now() + ctx.measureMs, read);
    await sleep(ctx.measureMs);
    await loop.stop();
    return summary(loop.samples, `${what} at rest`);
  };
  // Every fan-out run here, the loops beside the judged one included: what a deliver-only worker must have sent.
  let fanOutsInAll = 0;
  const whileDelivering = async (read: (i: number) => Promise<unknown>, fanOuts: number, what: string) => {
    const loop = timed(Infinity, read);
    const windows: { from: number; to: number }[] = [];
    try {
      for (let n = 0; n < fanOuts; n += 1) {
        const r = await fanOut(client, recipients, audience.devices, fleet, db);
        fanOutsInAll += 1;
        windows.push({ from: r.startedAt, to: r.lastAt });
      }
    } finally {
      await loop.stop();
    }
    const inWindows = loop.samples.filter((s) => windows.some((w) => s.start >= w.from && s.end <= w.to));
    return summary(inWindows, `${what} while delivering`);
  };
  // Warm: connections, the worker's read path, the JIT.
  await timed(Date.now() + ctx.warmupMs, firstReads).stop();
  await timed(Date.now() + ctx.warmupMs, databaseReads).stop();
  const idle = await atRest(firstReads, 'get_pushrules');
  const storedIdle = await atRest(storedReads, 'get_pushrules of stored rules');
  const databaseIdle = await atRest(databaseReads, 'database reads');
  const firstWritesIdle = await atRest(databaseFirstWrites, 'database first writes');
  const during = await whileDelivering(firstReads, ISOLATION_FANOUTS, 'get_pushrules');
  const storedDuring = await whileDelivering(storedReads, 1, 'get_pushrules of stored rules');
  const databaseDuring = await whileDelivering(databaseReads, 1, 'database reads');
  const firstWritesDuring = await whileDelivering(databaseFirstWrites, 1, 'database first writes');
  await accountData.deleteMany({ _id: { $regex: `:${PROBE_SERVER}$` } });
  return {
    idle,
    during,
    stored: { idle: storedIdle, during: storedDuring },
    store: { idle: databaseIdle, during: databaseDuring },
    storeFirstWrite: { idle: firstWritesIdle, during: firstWritesDuring },
    fanOuts: ISOLATION_FANOUTS,
    fanOutsInAll,
  };
}

function summary(samples: readonly Sample[], what: string) {
  const errors = samples.filter((s) => s.error !== undefined);
  if (errors.length > 0) log(`  ${errors.length} ${what} failed: ${errors[0]?.error ?? ''}`);
  return { ...summarize(samples.map((s) => s.end - s.start)), errors: errors.length };
}
