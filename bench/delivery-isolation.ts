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
 * received count as "during".
 *
 * Beside it, as a control, the same users' documents read straight from
 * the database by the bench (`findOne` by `_id`, c = 1): a read that misses
 * the worker's cache waits for the database, which serves the fan-out's
 * pusher reads and journal writes at the same time, so its tail bounds the
 * worker's.
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
  const viaWorker = async (user: string) => client.getPushRules(user);
  const storeAlone = async (user: string) => accountData.findOne({ _id: user });
  const timed = (untilMs: number, read: (user: string) => Promise<unknown>) => {
    const samples: Sample[] = [];
    const state = { stop: false };
    const loop = (async () => {
      for (let i = 0; !state.stop && Date.now() < untilMs; i += 1) {
        const user = audience.userIds[i % audience.userIds.length] ?? '';
        const start = performance.timeOrigin + performance.now();
        // A failed read counts, as slow as it took: a read that fails while delivery runs is the isolation failing.
        const error = await read(user).then(
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
  // Warm: connections, the worker's read path, the JIT.
  await Promise.all([
    timed(Date.now() + ctx.warmupMs, viaWorker).stop(),
    timed(Date.now() + ctx.warmupMs, storeAlone).stop(),
  ]);
  const idleLoops = [
    timed(Date.now() + ctx.measureMs, viaWorker),
    timed(Date.now() + ctx.measureMs, storeAlone),
  ] as const;
  await sleep(ctx.measureMs);
  await Promise.all(idleLoops.map(async (loop) => loop.stop()));

  const during = [timed(Infinity, viaWorker), timed(Infinity, storeAlone)] as const;
  const windows: { from: number; to: number }[] = [];
  try {
    for (let n = 0; n < ISOLATION_FANOUTS; n += 1) {
      const r = await fanOut(client, recipients, audience.devices, fleet, db);
      windows.push({ from: r.startedAt, to: r.lastAt });
    }
  } finally {
    await Promise.all(during.map(async (loop) => loop.stop()));
  }
  const summary = (samples: readonly Sample[], what: string) => {
    const errors = samples.filter((s) => s.error !== undefined);
    if (errors.length > 0) log(`  ${errors.length} ${what} failed: ${errors[0]?.error ?? ''}`);
    return { ...summarize(samples.map((s) => s.end - s.start)), errors: errors.length };
  };
  const inWindows = (samples: readonly Sample[]) =>
    samples.filter((s) => windows.some((w) => s.start >= w.from && s.end <= w.to));
  return {
    idle: summary(idleLoops[0].samples, 'get_pushrules at rest'),
    during: summary(inWindows(during[0].samples), 'get_pushrules while delivering'),
    store: {
      idle: summary(idleLoops[1].samples, 'store reads at rest'),
      during: summary(inWindows(during[1].samples), 'store reads while delivering'),
    },
    fanOuts: ISOLATION_FANOUTS,
  };
}
