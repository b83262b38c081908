/**
 * The delivery part of `npm run bench` (issue 22): `notify` fan-outs from a
 * worker to push gateway doubles on loopback, next to the raw limit of the
 * same HTTP client sending the same requests with no broker and no store;
 * a gateway outage under load; and the read queue's latency while a
 * fan-out is delivered. See bench/README.md ("Delivery").
 */
import * as os from 'node:os';
import { join } from 'node:path';
import type { Db } from 'mongodb';
import { PushRulesClient } from '../src/client/push-rules-client.js';
import { MongoPushStore } from '../src/store/mongo-push-store.js';
import { benchRecipients, deliveryAudience, seedPushers, type DeliveryAudience } from './support/delivery-seed.js';
import type { DeliveryResults } from './support/delivery-report.js';
import type { DeliveryContext } from './support/delivery-context.js';
import { brokerUser } from './support/broker-user.js';
import { GatewayFleet } from './support/gateway-fleet.js';
import { startWorkerWithHealth, type Child } from './support/processes.js';
import { deliveredBy, deviceOutcomes } from './support/worker-device-outcomes.js';
import { keepIfFailed } from './support/outage-log.js';
import { OUTAGE_DEVICES, OUTAGE_RATE, outage } from './delivery-outage.js';
import { bareRow, fanOut, plan, rawRow, workerRow } from './delivery-fanout.js';
import { isolation } from './delivery-isolation.js';

/** Several ports, several gateways: the per-host cap (32 in flight) applies to each. */
const GATEWAYS = 4;
const FANOUT_USERS = 10_000;
const SLOW_GATEWAY_MS = 100;
/** The bench workers' MongoDB timeouts (the driver's socket and pool wait, and each store operation's). */
const STAND_IN_TIMEOUT_MS = 120_000;

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
  const startWithHealth = async (name: string, roles?: string, logFile?: string) => {
    const started = await startWorkerWithHealth(
      { ...env(name), ...(roles === undefined ? {} : { WORKER_ROLES: roles }) },
      ctx.workerArgs,
      logFile,
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
              devices: (reads.fanOutsInAll ?? reads.fanOuts) * single.devices,
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
      // The worker's log, kept only if the per-device check fails (or BENCH_CHILD_LOG names where to keep it):
      // twice a device got one past its cap in a run that kept no log.
      const ownLog = process.env['BENCH_CHILD_LOG'] === undefined || process.env['BENCH_CHILD_LOG'] === '';
      const workerLog = ownLog ? join(os.tmpdir(), `mpw-outage-worker-${ctx.id}.log`) : undefined;
      const { child: worker, healthPort } = await startWithHealth(name, undefined, workerLog);
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
        if (workerLog !== undefined) keepIfFailed(workerLog, results.outage?.check, log);
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
