/**
 * The read queue's isolation from delivery (bench/README.md, "Delivery"):
 * `get_pushrules` latency alone, then while 10k fan-outs are delivered.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from 'mongodb';
import type { PushRulesClient } from '../src/client/push-rules-client.js';
import { benchRecipients, type DeliveryAudience } from './support/delivery-seed.js';
import { summarize, type IsolationResult } from './support/delivery-report.js';
import type { DeliveryContext } from './support/delivery-context.js';
import type { GatewayFleet } from './support/gateway-fleet.js';
import { fanOut } from './delivery-fanout.js';

const ISOLATION_FANOUTS = 3;

const log = (line: string) => {
  console.error(line);
};

/**
 * `get_pushrules` at c = 1 on the read queue: alone, then while 10k
 * fan-outs are delivered one after the other. Only requests that started
 * after a notify was published and ended before its last device was
 * received count as "during".
 */
export async function isolation(
  client: PushRulesClient,
  audience: DeliveryAudience,
  fleet: GatewayFleet,
  db: Db,
  ctx: DeliveryContext,
): Promise<IsolationResult> {
  const recipients = benchRecipients(audience.userIds);
  const timed = (untilMs: number) => {
    const samples: { start: number; end: number; error?: string }[] = [];
    const state = { stop: false };
    const loop = (async () => {
      for (let i = 0; !state.stop && Date.now() < untilMs; i += 1) {
        const user = audience.userIds[i % audience.userIds.length] ?? '';
        const start = performance.timeOrigin + performance.now();
        // A failed read counts, as slow as it took: a read that fails while delivery runs is the isolation failing.
        const error = await client.getPushRules(user).then(
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
  await timed(Date.now() + ctx.warmupMs).stop();
  const idleLoop = timed(Date.now() + ctx.measureMs);
  await sleep(ctx.measureMs);
  await idleLoop.stop();
  const idle = idleLoop.samples.map((s) => s.end - s.start);

  const during = timed(Infinity);
  const windows: { from: number; to: number }[] = [];
  try {
    for (let n = 0; n < ISOLATION_FANOUTS; n += 1) {
      const r = await fanOut(client, recipients, audience.devices, fleet, db);
      windows.push({ from: r.startedAt, to: r.lastAt });
    }
  } finally {
    await during.stop();
  }
  const inWindows = during.samples.filter((s) => windows.some((w) => s.start >= w.from && s.end <= w.to));
  const errors = inWindows.filter((s) => s.error !== undefined);
  if (errors.length > 0) log(`  ${errors.length} get_pushrules failed while delivering: ${errors[0]?.error ?? ''}`);
  return {
    idle: { ...summarize(idle), errors: idleLoop.samples.filter((s) => s.error !== undefined).length },
    during: { ...summarize(inWindows.map((s) => s.end - s.start)), errors: errors.length },
    fanOuts: ISOLATION_FANOUTS,
  };
}
