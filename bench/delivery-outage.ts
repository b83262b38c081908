/**
 * The 60 s gateway outage of `npm run bench -- --only delivery/outage`
 * (bench/README.md, "The outage"): a steady load of `notify`, the gateway
 * failing for part of it, then the drain, checked device by device.
 */
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from 'mongodb';
import type { PushRulesClient } from '../src/client/push-rules-client.js';
import { loadConfig } from '../src/config/load-config.js';
import { benchNotification, benchRecipients, pushkeyOf, type DeliveryAudience } from './support/delivery-seed.js';
import { breakerBound, mb, summarize, type OutageResult } from './support/delivery-report.js';
import type { GatewayFleet } from './support/gateway-fleet.js';
import { checkOutage, outageCheckPassed, type Published } from './support/outage-check.js';
import { pendingDrained } from './support/pending-drained.js';
import type { Child } from './support/processes.js';
import { peakRssBytes, rssBytes } from './support/proc-stats.js';

/** The outage's devices, one per user, all on one gateway. */
export const OUTAGE_DEVICES = 2000;
/** `notify` messages a second, while the intake keeps up. */
export const OUTAGE_RATE = 50;
const OUTAGE_HEALTHY_MS = 10_000;

/** The part of the delivery bench's context the outage reads (`--delivery-outage-seconds`, `--delivery-outage-room`). */
export interface OutageSettings {
  readonly outageSeconds: number;
  readonly outageRoom: number;
}
const DEFAULTS = loadConfig();

const log = (line: string) => {
  console.error(line);
};

/**
 * A gateway failing (503 to everything) for `outageSeconds` under a steady
 * load, then answering again. See bench/README.md for why each
 * notification goes to a room of `outageRoom` devices, not to all 2,000.
 */
export async function outage(
  client: PushRulesClient,
  audience: DeliveryAudience,
  fleet: GatewayFleet,
  db: Db,
  worker: Child,
  ctx: OutageSettings,
  deliverQueue: string,
): Promise<OutageResult> {
  const room = Math.min(ctx.outageRoom, OUTAGE_DEVICES);
  const rooms = Math.ceil(OUTAGE_DEVICES / room);
  const outageMs = ctx.outageSeconds * 1000;
  const members = (r: number) => audience.userIds.slice(r * room, (r + 1) * room);
  const roomRecipients = Array.from({ length: rooms }, (_, r) => benchRecipients(members(r)));
  const sent: { n: number; at: number; room: number; takenInAt: number }[] = [];
  await fleet.restore();
  await fleet.clear();
  const rss = { before: rssBytes(worker.pid) || 0, max: 0, maxAt: 0 };
  const sampler = setInterval(() => {
    const now = rssBytes(worker.pid) || 0;
    if (now > rss.max) Object.assign(rss, { max: now, maxAt: Date.now() });
  }, 250);
  // Unref'd, here and below: a scenario that throws (a backlog never drained) must not keep the bench alive.
  sampler.unref();
  const sends: Promise<void>[] = [];
  const failures = { count: 0, first: '' };
  const pendingReplies = { count: 0 };
  const startedAt = Date.now();
  const loadEnd = startedAt + OUTAGE_HEALTHY_MS + outageMs;
  const times = { outageStart: Number.NaN, restoredAt: Number.NaN };
  const switches = (async () => {
    await sleep(OUTAGE_HEALTHY_MS);
    await fleet.behave({ kind: 'status', status: 503 }, 0);
    // Taken once the double fails everything: every 200 before this instant was before the outage.
    times.outageStart = Date.now();
    log(`  the gateway fails everything (503) for ${ctx.outageSeconds} s of load`);
  })();
  const progress = setInterval(() => {
    const taken = sent.filter((p) => Number.isFinite(p.takenInAt)).length;
    log(
      `  ${Math.round((Date.now() - startedAt) / 1000)} s: ${sent.length} published, ${taken} taken in; worker RSS ${mb(rssBytes(worker.pid) || 0)}`,
    );
  }, 5000);
  progress.unref();
  // An open loop: each notify at its time, whatever the worker does. With a reply: when it comes, the
  // worker has stored and holds the deliveries, which is when they join their devices' backlogs.
  // At most one second of load unanswered: when the intake is slower than the load, the load
  // follows it (the broker then queues a second of messages, not minutes of them).
  const outstanding = { count: 0 };
  for (let k = 0; ; k += 1) {
    const due = startedAt + (k * 1000) / OUTAGE_RATE;
    if (due >= loadEnd) break;
    if (due > Date.now()) await sleep(due - Date.now());
    while (outstanding.count >= OUTAGE_RATE && Date.now() < loadEnd) await sleep(5);
    if (Date.now() >= loadEnd) break;
    const entry = { n: k, at: Date.now(), room: k % rooms, takenInAt: Number.NaN };
    sent.push(entry);
    outstanding.count += 1;
    sends.push(
      client.notify(benchNotification(`$o${k}`), roomRecipients[entry.room] ?? [], { reply: true }).then(
        (reply) => {
          // A reply with parts pending came after `delivery.replyWaitMs`, before the worker had taken all of the
          // notification in: when it did is not known (bench/support/outage-check.ts judges the device by what fits).
          if (reply.pending === undefined) entry.takenInAt = Date.now();
          else pendingReplies.count += 1;
          outstanding.count -= 1;
        },
        (error: unknown) => {
          outstanding.count -= 1;
          failures.count += 1;
          failures.first ||= error instanceof Error ? error.message : String(error);
        },
      ),
    );
  }
  await switches;
  log(`  ${sent.length} notify messages published; the load stops, the gateway still fails`);
  // The gateway comes back only once the worker has taken every notify in (its reply: stored and held).
  // An intake that lags behind the load would otherwise take notifications in after the recovery, while the
  // backlog drains, and which of them the worker had when the gateway came back could not be told from the
  // replies (a reply comes once the part is stored, `persistAfterMs` after the intake): the backlog as of the
  // recovery is then exactly what was published, and each device must get its newest N of it, in order.
  await Promise.all(sends);
  const loadEndedAt = Date.now();
  const deadHost = (await fleet.stats()).answers['503'] ?? 0;
  // Taken before the double answers again: every 200 after the outage is after this instant.
  times.restoredAt = Date.now();
  await fleet.restore();
  clearInterval(progress);
  log(
    `  every notify taken in ${((loadEndedAt - loadEnd) / 1000).toFixed(1)} s after the load stopped; the gateway answers again (down ${((times.restoredAt - times.outageStart) / 1000).toFixed(1)} s); ${deadHost} requests reached it while it failed`,
  );
  if (failures.count > 0) log(`  ${failures.count} notify messages failed: ${failures.first}`);
  if (pendingReplies.count > 0)
    log(`  ${pendingReplies.count} replies came with parts still pending: their intake time is not known`);
  const lags = sent.map((p) => p.takenInAt - p.at).filter(Number.isFinite);
  log(
    `  intake lag p50 ${Math.round(summarize(lags).p50Ms)} ms, max ${Math.round(Math.max(...lags))} ms; waiting for the backlog`,
  );
  // Where the peak is (the backlog building, or draining) bounds what a cut of it can be.
  const draining = setInterval(() => {
    log(
      `  ${Math.round((Date.now() - times.restoredAt) / 1000)} s draining: worker RSS ${mb(rssBytes(worker.pid) || 0)}`,
    );
  }, 5000);
  draining.unref();
  await pendingDrained(db, 2 * outageMs + 180_000, deliverQueue);
  clearInterval(draining);
  clearInterval(sampler);
  const peakFromRestore = (rss.maxAt - times.restoredAt) / 1000;
  const side = peakFromRestore < 0 ? 'before' : 'after';
  log(`  worker RSS peaked at ${mb(rss.max)}, ${Math.abs(peakFromRestore).toFixed(1)} s ${side} the gateway came back`);
  const hwm = peakRssBytes(worker.pid);
  const delivered = await fleet.deviceLog(0);
  const afterRestore = [...delivered.values()]
    .flat()
    .map((d) => d.at)
    .filter((at) => at >= times.restoredAt)
    .sort((a, b) => a - b);
  const firstAfter = afterRestore[0] ?? Number.NaN;
  const published = new Map<string, Published[]>(audience.userIds.map((_, i) => [pushkeyOf('o', i), []]));
  for (const p of sent) {
    for (let i = p.room * room; i < Math.min((p.room + 1) * room, OUTAGE_DEVICES); i += 1)
      published.get(pushkeyOf('o', i))?.push({ n: p.n, at: p.at, takenInAt: p.takenInAt });
  }
  const check = checkOutage({
    published,
    delivered,
    outageStart: times.outageStart,
    recoveredAt: firstAfter,
    maxPending: DEFAULTS.delivery.maxPendingPerDevice,
    eventNumber: (eventId) => Number(eventId.slice(2)),
  });
  // The raw figures, for the check to be run again on them: always to `BENCH_OUTAGE_DUMP=<file>`, and to a
  // temporary file when the check failed (its path logged).
  const asked = process.env['BENCH_OUTAGE_DUMP'];
  const dump =
    asked !== undefined && asked !== ''
      ? asked
      : outageCheckPassed(check)
        ? undefined
        : join(tmpdir(), `mpw-outage-devices-${String(process.pid)}-${String(Date.now())}.json`);
  if (dump !== undefined && dump !== asked) log(`  the per-device check failed: its figures are kept at ${dump}`);
  if (dump !== undefined)
    writeFileSync(
      dump,
      JSON.stringify({
        published: [...published],
        delivered: [...delivered],
        outageStart: times.outageStart,
        restoredAt: times.restoredAt,
        recoveredAt: firstAfter,
        maxPending: DEFAULTS.delivery.maxPendingPerDevice,
      }),
    );
  return {
    devices: OUTAGE_DEVICES,
    room,
    ratePerSecond: OUTAGE_RATE,
    healthySeconds: OUTAGE_HEALTHY_MS / 1000,
    outageSeconds: ctx.outageSeconds,
    downMs: times.restoredAt - times.outageStart,
    published: sent.length,
    publishFailures: failures.count,
    pendingReplies: pendingReplies.count,
    intakeLagP50Ms: summarize(lags).p50Ms,
    intakeLagMaxMs: Math.max(...lags),
    deviceNotificationsDuringOutage: sent
      .filter((p) => p.at >= times.outageStart && p.at < times.restoredAt)
      .reduce((sum, p) => sum + members(p.room).length, 0),
    deadHostRequests: deadHost,
    deadHostBound: breakerBound(times.restoredAt - times.outageStart, DEFAULTS.delivery.maxInFlightPerHost),
    firstDeliveryAfterMs: firstAfter - times.restoredAt,
    requestsFirstSecondAfter: afterRestore.filter((at) => at < firstAfter + 1000).length,
    drainMs: (afterRestore.at(-1) ?? Number.NaN) - times.restoredAt,
    workerRssBeforeBytes: rss.before,
    workerRssMaxBytes: rss.max,
    workerRssHwmBytes: hwm,
    check,
  };
}
