/**
 * The delivery part of `npm run bench` (issue 22): `notify` fan-outs from a
 * worker to push gateway doubles on loopback, next to the raw limit of the
 * same HTTP client sending the same requests with no broker and no store;
 * a gateway outage under load; and the read queue's latency while a
 * fan-out is delivered. See bench/README.md ("Delivery").
 */
import * as os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from 'mongodb';
import { PushRulesClient, type NotifyRecipient } from '../src/client/push-rules-client.js';
import { loadConfig } from '../src/config/load-config.js';
import { parseAddressAllowlist } from '../src/delivery/address-allowlist.js';
import { planIntake, type PlannedDelivery } from '../src/delivery/intake-plan.js';
import { bodyText } from '../src/delivery/request-body.js';
import { GatewayClient } from '../src/delivery-http/gateway-client.js';
import { MongoPushStore } from '../src/store/mongo-push-store.js';
import {
  benchNotification,
  benchRecipients,
  deliveryAudience,
  deliveryPushersOf,
  seedPushers,
  type DeliveryAudience,
} from './support/delivery-seed.js';
import { summarize, type DeliveryResults, type FanOutRow, type IsolationResult } from './support/delivery-report.js';
import { BareHttpClient } from './support/bare-http-client.js';
import { GatewayFleet } from './support/gateway-fleet.js';
import { startWorkerWithHealth, type Child } from './support/processes.js';
import { cpuSeconds } from './support/proc-stats.js';
import { pendingDrained } from './support/pending-drained.js';
import { OUTAGE_DEVICES, OUTAGE_RATE, outage } from './delivery-outage.js';
import type { WorkerPartContext } from './support/part-context.js';

export interface DeliveryContext extends WorkerPartContext {
  readonly warmupMs: number;
  readonly measureMs: number;
  /** Measured rounds per fan-out scenario, after one unmeasured. */
  readonly rounds: number;
  /** How long the gateway is down in the outage scenario. */
  readonly outageSeconds: number;
  /** Devices each notification of the outage scenario goes to. */
  readonly outageRoom: number;
  /** Whether a part (`delivery/bare`, `/raw`, `/fanout`, `/slow`, `/batched`, `/outage`, `/isolation`, `/roles`) runs. */
  readonly selected: (part: string) => boolean;
}

/** Several ports, several gateways: the per-host cap (32 in flight) applies to each. */
const GATEWAYS = 4;
const FANOUT_USERS = 10_000;
const SLOW_GATEWAY_MS = 100;
const ISOLATION_FANOUTS = 3;
const ROUND_TIMEOUT_MS = 180_000;
/** The bench workers' MongoDB timeouts (the driver's socket and pool wait, and each store operation's). */
const STAND_IN_TIMEOUT_MS = 120_000;
const DEFAULTS = loadConfig();

const log = (line: string) => {
  console.error(line);
};

export async function runDeliveryScenarios(ctx: DeliveryContext): Promise<DeliveryResults> {
  const loadAverageAtStart = os.loadavg();
  log(`delivery: load average ${loadAverageAtStart.map((l) => l.toFixed(2)).join(' ')} at the start`);
  const notes: string[] = [];
  const results: { -readonly [K in keyof DeliveryResults]: DeliveryResults[K] } = {
    gateways: GATEWAYS,
    rounds: ctx.rounds,
    loadAverageAtStart,
    notes,
  };
  const queue = `bench.push.rpc.${ctx.id}.d`;
  const deliverQueue = `${queue}.deliver`;
  const publisher = brokerUser(ctx.amqpUrl);
  const env = (database: string): NodeJS.ProcessEnv => ({
    ...ctx.childEnv(queue, database),
    // As `childEnv` names it (and `deleteQueues` deletes it): the client below publishes there.
    DELIVERY_QUEUE: deliverQueue,
    PUSH_GATEWAY_IP_ALLOWLIST: '127.0.0.1/32',
    ALLOW_INSECURE_PUSH_GATEWAYS: 'true',
    TRUSTED_PUBLISHERS: publisher,
    // The stand-in reads a 10k-recipient intake's pushers in 15-20 s (it scans the collection for each
    // `$in` list, see `storeRead`): with the default 2 s pool wait and 5 s socket timeout some of those
    // reads fail, and the intake starts the whole message again, for ever. See bench/README.md.
    MONGODB_SOCKET_TIMEOUT_MS: String(STAND_IN_TIMEOUT_MS),
    // And the monitor's check: a stand-in busy scanning does not answer it within the default 2 s, and
    // the driver then clears the pool, failing every operation in flight (the intake starts again).
    MONGODB_CONNECT_TIMEOUT_MS: String(STAND_IN_TIMEOUT_MS),
    MONGODB_WAIT_QUEUE_TIMEOUT_MS: String(STAND_IN_TIMEOUT_MS),
    MONGODB_OPERATION_TIMEOUT_MS: String(STAND_IN_TIMEOUT_MS),
  });
  const databases: string[] = [];
  const database = async (part: string, audience: DeliveryAudience): Promise<{ name: string; db: Db }> => {
    const name = `bench_push_${ctx.id}_delivery_${part}`;
    databases.push(name);
    const db = ctx.mongo.db(name);
    await seedPushers(db, audience);
    return { name, db };
  };
  const workers: Child[] = [];
  const start = async (name: string, roles?: string) => (await startWithHealth(name, roles)).child;
  /** A worker on database `name`, of `roles` (`WORKER_ROLES`) when given, else of every role. */
  const startWithHealth = async (name: string, roles?: string) => {
    const started = await startWorkerWithHealth(
      { ...env(name), ...(roles === undefined ? {} : { WORKER_ROLES: roles }) },
      ctx.workerArgs,
    );
    workers.push(started.child);
    return started;
  };
  const stop = async (worker: Child) => {
    await worker.stop();
    workers.splice(workers.indexOf(worker), 1);
  };

  const fleet = await GatewayFleet.start(GATEWAYS);
  const client = new PushRulesClient({
    url: ctx.amqpUrl,
    queue,
    readQueue: `${queue}.read`,
    deliverQueue,
    publisherUserId: publisher,
    timeoutMs: 60_000,
  });
  /** Runs one scenario; a failure is noted (with the worker's last log lines) and the next scenario runs. */
  const attempt = async (part: string, run: () => Promise<void>, worker?: Child) => {
    try {
      await run();
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      log(`${part}: not measured: ${message}`);
      const tail = (worker?.recentOutput() ?? []).map((line) => line.slice(0, 400));
      for (const line of tail.slice(-5)) log(`  worker: ${line}`);
      notes.push(
        [
          `**${part}: not measured**: ${message}.`,
          ...(tail.length === 0 ? [] : ["The worker's last log lines:", '', '```', ...tail.slice(-5), '```']),
        ].join('\n'),
      );
    }
  };
  const pids = (worker?: Child) => ({
    ...(worker === undefined ? {} : { worker: worker.pid }),
    gateways: fleet.pid,
    ...ctx.others,
  });
  try {
    const single = deliveryAudience('d1', FANOUT_USERS, 1, fleet.notifyUrls);
    const raw = ctx.selected('delivery/raw') || ctx.selected('delivery/fanout');
    const slow = ctx.selected('delivery/slow');
    if (raw || slow) {
      const planned = plan(single, '$raw');
      if (raw || ctx.selected('delivery/bare')) {
        log('delivery/bare: a bare node:http keep-alive client, the same 10k requests, gateways answering at once');
        results.bare = await bareRow('delivery/bare', planned, single.devices, fleet, ctx.rounds, pids());
      }
      if (raw) {
        log('delivery/raw: the gateway client alone, the same 10k requests, gateways answering at once');
        results.raw = await rawRow('delivery/raw', planned, single.devices, fleet, ctx.rounds, pids());
      }
      if (slow) {
        log(`delivery/raw-slow: the same, gateways answering after ${SLOW_GATEWAY_MS} ms`);
        await fleet.behave({ kind: 'answer', delayMs: SLOW_GATEWAY_MS });
        results.rawSlow = await rawRow('delivery/raw-slow', planned, single.devices, fleet, ctx.rounds, pids());
        await fleet.restore();
      }
    }
    if (ctx.selected('delivery/fanout') || slow || ctx.selected('delivery/isolation')) {
      const { name, db } = await database('single', single);
      if (ctx.selected('delivery/fanout'))
        results.storeReadMs = { ...results.storeReadMs, single: await storeRead(db, single) };
      const worker = await start(name);
      try {
        if (ctx.selected('delivery/fanout')) {
          log('delivery/fanout: one notify to 10k recipients, one device each');
          await attempt(
            'delivery/fanout',
            async () => {
              results.fanout = await workerRow('delivery/fanout', client, single, fleet, db, ctx.rounds, pids(worker));
            },
            worker,
          );
        }
        if (slow) {
          log(`delivery/slow: the same, gateways answering after ${SLOW_GATEWAY_MS} ms`);
          await fleet.behave({ kind: 'answer', delayMs: SLOW_GATEWAY_MS });
          await attempt(
            'delivery/slow',
            async () => {
              results.slow = await workerRow('delivery/slow', client, single, fleet, db, ctx.rounds, pids(worker));
            },
            worker,
          );
          await fleet.restore();
        }
        if (ctx.selected('delivery/isolation')) {
          log('delivery/isolation: get_pushrules c=1, idle, then while 10k fan-outs are delivered');
          await attempt(
            'delivery/isolation',
            async () => {
              results.isolation = await isolation(client, single, fleet, db, ctx);
            },
            worker,
          );
        }
      } finally {
        await stop(worker);
      }
    }
    if (ctx.selected('delivery/batched')) {
      log('delivery/batched: one notify to 10k recipients with 3 devices each on one URL');
      const triple = deliveryAudience('d3', FANOUT_USERS, 3, fleet.notifyUrls);
      const { name, db } = await database('triple', triple);
      results.storeReadMs = { ...results.storeReadMs, triple: await storeRead(db, triple) };
      const worker = await start(name);
      try {
        await attempt(
          'delivery/batched',
          async () => {
            results.batched = await workerRow('delivery/batched', client, triple, fleet, db, ctx.rounds, pids(worker));
          },
          worker,
        );
      } finally {
        await stop(worker);
      }
    }
    if (ctx.selected('delivery/roles')) {
      log(
        "delivery/roles: 3 workers, one deliver-only: its share of 10k fan-outs, and the others' get_pushrules c=1 while it delivers",
      );
      const { name, db } = await database('roles', single);
      // The deliver-only worker first, as an operator would add it; the readers declare the request and read queues.
      const deliverer = await startWithHealth(name, 'deliver');
      const readers = [await start(name, 'rpc,read,evaluate'), await start(name, 'rpc,read,evaluate')];
      try {
        await attempt(
          'delivery/roles',
          async () => {
            // Warm: the deliverer's pusher cache, connections and JIT, as the "warm 10k notify" says.
            await fanOut(client, benchRecipients(single.userIds), single.devices, fleet, db);
            const before = await deliveredBy(deliverer.healthPort);
            const reads = await isolation(client, single, fleet, db, ctx);
            results.roles = {
              ...reads,
              devices: reads.fanOuts * single.devices,
              deliveredByDeliverWorker: (await deliveredBy(deliverer.healthPort)) - before,
            };
          },
          deliverer.child,
        );
      } finally {
        for (const worker of [deliverer.child, ...readers]) await stop(worker);
      }
    }
    if (ctx.selected('delivery/outage')) {
      log(
        `delivery/outage: ${OUTAGE_RATE} notify/s to ${ctx.outageRoom} of ${OUTAGE_DEVICES} devices, the gateway failing for ${ctx.outageSeconds} s`,
      );
      const audience = deliveryAudience('o', OUTAGE_DEVICES, 1, fleet.notifyUrls.slice(0, 1));
      const { name, db } = await database('outage', audience);
      const { child: worker, healthPort } = await startWithHealth(name);
      try {
        // Replies may come long after the publish when the intake lags: a deadline that never cuts one short.
        const patient = new PushRulesClient({
          url: ctx.amqpUrl,
          queue,
          deliverQueue,
          publisherUserId: publisher,
          timeoutMs: 2 * ctx.outageSeconds * 1000 + 600_000,
        });
        try {
          await attempt(
            'delivery/outage',
            async () => {
              results.outage = {
                ...(await outage(patient, audience, fleet, db, worker, ctx, deliverQueue)),
                ...(await deviceOutcomes(healthPort)),
              };
            },
            worker,
          );
        } finally {
          await patient.close();
        }
      } finally {
        await stop(worker);
      }
    }
  } finally {
    await Promise.all(workers.map(async (w) => w.stop()));
    await client.close();
    await fleet.stop();
    await ctx.deleteQueues(queue).catch(() => undefined);
    for (const name of databases)
      await ctx.mongo
        .db(name)
        .dropDatabase()
        .catch(() => undefined);
  }
  return results;
}

/**
 * The store's share of an intake: the recipients' pushers read as the
 * intake reads them (`listPushers` for each, at once, batched by the
 * store), from this process, with no broker and no worker.
 */
async function storeRead(db: Db, audience: DeliveryAudience): Promise<number> {
  const store = new MongoPushStore(db, { accountDataCollection: 'account_data', pushersCollection: 'pushers' });
  await store.ensureIndexes();
  const startedAt = Date.now();
  const lists = await Promise.all(audience.userIds.map(async (userId) => store.listPushers(userId)));
  const ms = Date.now() - startedAt;
  const found = lists.reduce((sum, list) => sum + list.length, 0);
  if (found !== audience.devices) throw new Error(`the store read ${found} pushers, not ${audience.devices}`);
  log(`  store: the pushers of ${audience.userIds.length} recipients (${found} devices) read in ${ms} ms`);
  return ms;
}

/** The requests the worker plans for one notify to the audience: the raw limit sends exactly these. */
function plan(audience: DeliveryAudience, eventId: string): readonly PlannedDelivery[] {
  const pushers = deliveryPushersOf(audience);
  return planIntake(
    { op: 'notify', notification: benchNotification(eventId), recipients: benchRecipients(audience.userIds) },
    (userId) => pushers.get(userId) ?? [],
    { notifyId: 'raw', partition: 0, seq: 1, acceptedAt: Date.now() },
  ).deliveries;
}

interface Round {
  readonly ms: number;
  readonly firstMs: number;
  readonly requests: number;
}

/**
 * One unmeasured round (connections, JIT), then `rounds` measured ones,
 * with the CPU time each watched process spent over the measured rounds.
 */
async function rows(
  id: string,
  devices: number,
  rounds: number,
  pids: Readonly<Record<string, number | undefined>>,
  round: (n: number) => Promise<Round>,
): Promise<FanOutRow> {
  await round(0);
  const before = cpuOf(pids);
  const measured: Round[] = [];
  for (let n = 1; n <= rounds; n += 1) {
    const r = await round(n);
    log(
      `  ${id} round ${n}: first device ${Math.round(r.firstMs)} ms, last ${Math.round(r.ms)} ms, ${r.requests} requests`,
    );
    measured.push(r);
  }
  const after = cpuOf(pids);
  const cpu = Object.fromEntries(
    Object.keys(after).map((name) => [name, (((after[name] ?? 0) - (before[name] ?? 0)) * 1000) / rounds]),
  );
  const sorted = [...measured].sort((a, b) => a.ms - b.ms);
  const middle = sorted[Math.floor((sorted.length - 1) / 2)];
  return {
    id,
    devices,
    requests: middle?.requests ?? 0,
    roundsMs: measured.map((r) => r.ms),
    firstMs: measured.map((r) => r.firstMs),
    cpu,
  };
}

/** CPU seconds so far of each watched process, this one as `load`. */
function cpuOf(pids: Readonly<Record<string, number | undefined>>): Record<string, number> {
  const load = process.cpuUsage();
  const cpu: Record<string, number> = { load: (load.user + load.system) / 1e6 };
  for (const [name, pid] of Object.entries(pids)) if (pid !== undefined) cpu[name] = cpuSeconds(pid);
  return cpu;
}

/** The raw limit: the worker's HTTP client, configured as the worker configures it, sending the planned requests at once. */
async function rawRow(
  id: string,
  planned: readonly PlannedDelivery[],
  devices: number,
  fleet: GatewayFleet,
  rounds: number,
  pids: Readonly<Record<string, number | undefined>>,
): Promise<FanOutRow> {
  const sender = new GatewayClient({
    allowlist: parseAddressAllowlist(['127.0.0.1/32']),
    maxInFlight: DEFAULTS.delivery.maxInFlight,
    maxInFlightPerOrigin: DEFAULTS.delivery.maxInFlightPerHost,
    connectTimeoutMs: DEFAULTS.delivery.connectTimeoutMs,
    headersTimeoutMs: DEFAULTS.delivery.headersTimeoutMs,
    bodyTimeoutMs: DEFAULTS.delivery.bodyTimeoutMs,
    maxBodyBytes: DEFAULTS.delivery.maxResponseBytes,
  });
  try {
    return await sentAtOnce(id, planned, devices, fleet, rounds, pids, async (url, body) => {
      const exchange = await sender.send(url, body);
      return exchange.kind === 'response' && exchange.status === 200 ? undefined : exchange;
    });
  } finally {
    await sender.close();
  }
}

/**
 * Rounds of a sender alone (`rawRow`, `bareRow`): the planned requests, encoded before the clock starts (as a
 * bare client would hold them), sent at once each round; `send` answers what failed, or undefined.
 */
async function sentAtOnce(
  id: string,
  planned: readonly PlannedDelivery[],
  devices: number,
  fleet: GatewayFleet,
  rounds: number,
  pids: Readonly<Record<string, number | undefined>>,
  send: (url: string, body: string) => Promise<unknown>,
): Promise<FanOutRow> {
  const bodies = planned.map((d) => [d.url, bodyText(d.body)] as const);
  return rows(id, devices, rounds, pids, async () => {
    await fleet.clear();
    const startedAt = Date.now();
    const failed = (await Promise.all(bodies.map(async ([url, body]) => send(url, body)))).filter(
      (failure) => failure !== undefined,
    );
    if (failed.length > 0) throw new Error(`${id}: ${failed.length} requests failed: ${JSON.stringify(failed[0])}`);
    const stats = await fleet.waitForDevices(devices, ROUND_TIMEOUT_MS);
    return {
      ms: (stats.lastAt ?? Number.NaN) - startedAt,
      firstMs: (stats.firstAt ?? Number.NaN) - startedAt,
      requests: stats.requests,
    };
  });
}

/**
 * Issue 42's floor: a bare node:http keep-alive client (32 per gateway, 256 in all, as the worker's caps)
 * sending the planned requests at once; its CPU per request is what a delivered device is judged against.
 */
async function bareRow(
  id: string,
  planned: readonly PlannedDelivery[],
  devices: number,
  fleet: GatewayFleet,
  rounds: number,
  pids: Readonly<Record<string, number | undefined>>,
): Promise<FanOutRow> {
  const sender = new BareHttpClient(DEFAULTS.delivery.maxInFlightPerHost, DEFAULTS.delivery.maxInFlight);
  try {
    return await sentAtOnce(id, planned, devices, fleet, rounds, pids, async (url, body) => {
      const exchange = await sender.send(url, body);
      return 'status' in exchange && exchange.status === 200 ? undefined : exchange;
    });
  } finally {
    sender.close();
  }
}

let events = 0;

/** One notify to the whole audience per round (reply: false, resolved on the broker's confirm), timed to the last device a gateway received. */
async function workerRow(
  id: string,
  client: PushRulesClient,
  audience: DeliveryAudience,
  fleet: GatewayFleet,
  db: Db,
  rounds: number,
  pids: Readonly<Record<string, number | undefined>>,
): Promise<FanOutRow> {
  const recipients = benchRecipients(audience.userIds);
  return rows(id, audience.devices, rounds, pids, async () => fanOut(client, recipients, audience.devices, fleet, db));
}

async function fanOut(
  client: PushRulesClient,
  recipients: readonly NotifyRecipient[],
  devices: number,
  fleet: GatewayFleet,
  db: Db,
): Promise<Round & { readonly startedAt: number; readonly lastAt: number }> {
  await fleet.clear();
  events += 1;
  const notification = benchNotification(`$fanout${events}`);
  const startedAt = Date.now();
  await client.notify(notification, recipients);
  const stats = await fleet.waitForDevices(devices, ROUND_TIMEOUT_MS);
  const lastAt = stats.lastAt ?? Number.NaN;
  // Idle before the next round: every request done with and deleted from the store.
  await pendingDrained(db, ROUND_TIMEOUT_MS);
  return {
    ms: lastAt - startedAt,
    firstMs: (stats.firstAt ?? Number.NaN) - startedAt,
    requests: stats.requests,
    startedAt,
    lastAt,
  };
}

/**
 * `get_pushrules` at c = 1 on the read queue: alone, then while 10k
 * fan-outs are delivered one after the other. Only requests that started
 * after a notify was published and ended before its last device was
 * received count as "during".
 */
async function isolation(
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

/**
 * The worker's own count of devices by outcome (its `/metrics`), summed
 * over gateway hosts: nothing when the port is unknown or the read fails.
 */
/** Devices a worker counted delivered (`push_worker_delivery_devices_total{outcome="delivered"}`, every host). */
async function deliveredBy(healthPort: number | undefined): Promise<number> {
  const outcomes = (await deviceOutcomes(healthPort)).workerOutcomes;
  if (outcomes === undefined) throw new Error("the deliver-only worker's metrics could not be read");
  return outcomes['delivered'] ?? 0;
}

async function deviceOutcomes(healthPort: number | undefined): Promise<{ workerOutcomes?: Record<string, number> }> {
  if (healthPort === undefined) return {};
  try {
    const text = await (await fetch(`http://127.0.0.1:${healthPort}/metrics`)).text();
    const outcomes: Record<string, number> = {};
    for (const match of text.matchAll(
      /^push_worker_delivery_devices_total\{[^}]*outcome="([a-z_]+)"[^}]*\} (\S+)$/gm,
    )) {
      const [, outcome = '', value = '0'] = match;
      outcomes[outcome] = (outcomes[outcome] ?? 0) + Number(value);
    }
    return { workerOutcomes: outcomes };
  } catch (error) {
    log(`  the worker's metrics could not be read: ${error instanceof Error ? error.message : String(error)}`);
    return {};
  }
}

/** The broker user the bench publishes as (the AMQP URL's): the one `TRUSTED_PUBLISHERS` must name. */
/** The AMQP user of the first broker URL: the publisher the workers are told to trust. */
export function brokerUser(amqpUrl: string): string {
  const user = new URL(amqpUrl.split(',')[0] ?? amqpUrl).username;
  return user === '' ? 'guest' : decodeURIComponent(user);
}
