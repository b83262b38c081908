/**
 * The Synapse part of `npm run bench` (issue 40): a real Synapse 1.163.2 on
 * PostgreSQL pushing a room's messages with its own HTTP pushers, against
 * the same Synapse, on the same database and room, with the module of
 * clients/python handing them to three workers. Both push to one push
 * gateway double on loopback. See bench/README.md ("Synapse with the module").
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import * as os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { PushRulesClient } from '../src/client/push-rules-client.js';
import { postgresUnavailable, startPostgres } from '../test/integration/support/postgres-cluster.js';
import {
  installIntoSynapse,
  startSynapse,
  synapseUnavailable,
  type SynapseDatabase,
  type SynapseOptions,
  type SynapseServer,
} from '../test/integration/support/synapse-server.js';
import { brokerUser } from './support/broker-user.js';
import { GatewayFleet } from './support/gateway-fleet.js';
import { cpuSeconds } from './support/proc-stats.js';
import { startWorker, type Child } from './support/processes.js';
import {
  messagesFromDeviceLog,
  type SendRecord,
  type SynapseBenchResult,
  type SynapseSide,
} from './support/synapse-report.js';
import { BENCH_APP_ID, fillRoom, inParallel, registerMembers, setSynapsePushers } from './support/synapse-room.js';
import type { WorkerPartContext } from './support/part-context.js';

export interface SynapseBenchContext extends WorkerPartContext {
  /** The room's members, the sender included. */
  readonly members: number;
  /** Messages sent one after the other, measured (after two unmeasured). */
  readonly sends: number;
  /** Messages sent at once, after those. */
  readonly batch: number;
}

const WORKERS = 3;
const WARMUP_SENDS = 2;
/** How long no push may arrive while some are missing before the part notes them lost and goes on. */
const STALL_MS = 30_000;
/** After this many stalls the side stops: something is broken, and each costs half a minute. */
const MAX_STALLS = 3;
/** After the last push: late duplicates would arrive within this. */
const SETTLE_MS = 2000;
const CLIENT_PACKAGE = fileURLToPath(new URL('../clients/python', import.meta.url));

/**
 * Synapse's configuration on both sides: its rate limits off (startSynapse
 * already lifts the message, login, registration and join limits; joins to
 * one room have a limit of their own), its pushers allowed to reach the
 * double on 127.0.0.1 (Synapse's default `ip_range_blacklist` holds the
 * loopback range; `ip_range_whitelist` overrides it), and cheap password
 * hashes for the thousand registrations.
 */
const SETTINGS = {
  ip_range_whitelist: ['127.0.0.1/32'],
  rc_joins_per_room: { per_second: 10000, burst_count: 10000 },
  bcrypt_rounds: 4,
};
/** Synapse's pool to PostgreSQL: its documented example (cp_max 10), not the tests' 2. */
const CONNECTIONS = 10;

const log = (line: string) => {
  console.error(line);
};

export async function runSynapseBench(ctx: SynapseBenchContext): Promise<SynapseBenchResult> {
  const started = performance.now();
  const loadAverageAtStart = os.loadavg();
  const notes: string[] = [];
  const base = {
    loadAverageAtStart,
    members: ctx.members,
    sends: ctx.sends,
    batch: ctx.batch,
    workers: WORKERS,
  };
  log(`synapse: load average ${loadAverageAtStart.map((l) => l.toFixed(2)).join(' ')} at the start`);
  const unavailable = synapseUnavailable() ?? postgresUnavailable();
  if (unavailable !== undefined) {
    notes.push(`not measured: ${unavailable}`);
    return { ...base, setupMs: 0, totalMs: performance.now() - started, notes };
  }
  installIntoSynapse(CLIENT_PACKAGE);
  const stops: (() => Promise<unknown>)[] = [];
  let setupMs = 0;
  const result: { alone?: SynapseSide; module?: SynapseSide } = {};
  try {
    const postgres = await startPostgres();
    stops.push(
      async () =>
        new Promise<void>((resolve) => {
          postgres.stop();
          resolve();
        }),
    );
    await postgres.createDatabase('synapse');
    const database: SynapseDatabase = {
      kind: 'postgres',
      host: postgres.host,
      port: postgres.port,
      user: postgres.user,
      database: 'synapse',
      connections: CONNECTIONS,
    };
    const pushersInSynapse = async (): Promise<number> => {
      const client = new pg.Client({ connectionString: postgres.url('synapse') });
      await client.connect();
      try {
        const { rows } = await client.query<{ n: string }>('SELECT COUNT(*) AS n FROM pushers');
        return Number(rows[0]?.n);
      } finally {
        await client.end();
      }
    };
    const fleet = await GatewayFleet.start(1);
    stops.push(async () => fleet.stop());
    const gatewayUrl = fleet.notifyUrls[0] ?? '';

    // Synapse alone: the room, and each member's pusher registered with Synapse.
    const setupStarted = performance.now();
    let synapse = await startSynapse(database, { settings: SETTINGS });
    let stopSynapse = async () => synapse.stop();
    stops.push(async () => stopSynapse());
    log(`synapse: registering ${ctx.members} users`);
    const [owner, ...members] = await registerMembers(synapse, ctx.members);
    if (owner === undefined) throw new Error('a room needs a member');
    log(`synapse: ${members.length} joins`);
    const roomId = await fillRoom(synapse, owner, members);
    await setSynapsePushers(synapse, members, gatewayUrl);
    log(`synapse: ${await pushersInSynapse()} pushers in Synapse's table`);
    setupMs += performance.now() - setupStarted;
    const measureSide = async (side: string, pids: Record<string, number | undefined>) =>
      measureMessages({ synapse, fleet, owner, roomId, recipients: members.length, ctx, pids, notes, side });
    log(`synapse/alone: ${WARMUP_SENDS} + ${ctx.sends} messages one after the other, then ${ctx.batch} at once`);
    result.alone = await measureSide('alone', { synapse: synapse.pid, gateway: fleet.pid });

    // With the module: Synapse's pushers removed, the same pushers set in the pool, three workers.
    const switchStarted = performance.now();
    await setSynapsePushers(synapse, members, undefined);
    await stopSynapse();
    const queue = `bench.push.rpc.${ctx.id}.s`;
    const mongoDatabase = `bench_push_${ctx.id}_synapse`;
    stops.push(async () => ctx.mongo.db(mongoDatabase).dropDatabase());
    stops.push(async () => ctx.deleteQueues(queue));
    const publisher = brokerUser(ctx.amqpUrl);
    const workers: Child[] = [];
    stops.push(async () => Promise.all(workers.map(async (worker) => worker.stop())));
    for (let n = 0; n < WORKERS; n += 1)
      workers.push(
        await startWorker(
          {
            ...ctx.childEnv(queue, mongoDatabase),
            PUSH_GATEWAY_IP_ALLOWLIST: '127.0.0.1/32',
            ALLOW_INSECURE_PUSH_GATEWAYS: 'true',
            TRUSTED_PUBLISHERS: publisher,
          },
          ctx.workerArgs,
        ),
      );
    const client = new PushRulesClient({ url: ctx.amqpUrl, queue, publisherUserId: publisher, timeoutMs: 60_000 });
    stops.push(async () => client.close());
    await inParallel(members, 16, async (member) =>
      client.setPusher(
        member.userId,
        {
          kind: 'http',
          app_id: BENCH_APP_ID,
          pushkey: member.pushkey,
          app_display_name: 'Bench',
          device_display_name: member.pushkey,
          lang: 'en',
          data: { url: gatewayUrl },
        },
        { deviceId: member.deviceId },
      ),
    );
    const moduleOptions: SynapseOptions = {
      settings: { ...SETTINGS, pusher_instances: [] },
      modules: [
        {
          module: 'matrix_push_worker.synapse.PushWorkerModule',
          config: {
            amqp_url: ctx.amqpUrl,
            publisher_user_id: publisher,
            queue,
            evaluate_queue: `${queue}.evaluate`,
            deliver_queue: `${queue}.deliver`,
          },
        },
      ],
    };
    synapse = await startSynapse(database, moduleOptions);
    stopSynapse = async () => synapse.stop();
    const left = await pushersInSynapse();
    if (left !== 0) throw new Error(`${left} pushers left in Synapse's table`);
    log("synapse: Synapse's pushers table is empty, the pool holds the pushers");
    setupMs += performance.now() - switchStarted;
    log(`synapse/module: the same, through the module and ${WORKERS} workers`);
    result.module = await measureSide('module', {
      synapse: synapse.pid,
      gateway: fleet.pid,
      ...Object.fromEntries(workers.map((worker, n) => [`worker${String(n)}`, worker.pid])),
    });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    log(`synapse: not measured further: ${message}`);
    notes.push(`**not measured further**: ${message.slice(0, 600)}`);
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  }
  return { ...base, ...result, setupMs, totalMs: performance.now() - started, notes };
}

interface MeasureContext {
  readonly synapse: SynapseServer;
  readonly fleet: GatewayFleet;
  readonly owner: { readonly token: string };
  readonly roomId: string;
  readonly recipients: number;
  readonly ctx: SynapseBenchContext;
  /** Synapse's, the gateway double's and the workers' processes (`worker<n>`), for their CPU. */
  readonly pids: Readonly<Record<string, number | undefined>>;
  readonly notes: string[];
  readonly side: string;
}

/**
 * The measured messages of one side: unmeasured warm-up sends, then sends
 * one after the other (the next once the last one's pushes all arrived),
 * then a batch at once. The gateway's device log says afterwards which
 * devices got which message, and when.
 */
async function measureMessages(m: MeasureContext): Promise<SynapseSide> {
  const { synapse, fleet, recipients, ctx } = m;
  await fleet.clear();
  const path = () => `/_matrix/client/v3/rooms/${encodeURIComponent(m.roomId)}/send/m.room.message/${randomUUID()}`;
  const sent: SendRecord[] = [];
  const send = async (kind: SendRecord['kind'], n: number) => {
    const startedAt = Date.now();
    const start = performance.now();
    const { event_id: eventId } = (await synapse.request(m.owner.token, 'PUT', path(), {
      msgtype: 'm.text',
      body: `${kind} message ${String(n)}`,
    })) as { event_id: string };
    sent.push({ eventId, kind, startedAt, sendMs: performance.now() - start });
  };
  let devices = 0;
  let stalls = 0;
  /**
   * Waits for `more` device pushes for as long as pushes keep coming (Synapse alone takes minutes over a
   * batch); after `STALL_MS` without one, notes it and goes on from what arrived: those are lost.
   */
  const arrive = async (more: number, what: string) => {
    devices += more;
    let got = -1;
    let lastProgress = Date.now();
    for (;;) {
      const now = (await fleet.stats()).devicesDelivered;
      if (now >= devices) return;
      if (now > got) [got, lastProgress] = [now, Date.now()];
      else if (Date.now() - lastProgress > STALL_MS) break;
      await sleep(20);
    }
    m.notes.push(
      `${m.side}: ${what}: ${String(devices - got)} pushes missing, none arrived for ${String(STALL_MS / 1000)} s`,
    );
    devices = got;
    stalls += 1;
    if (stalls >= MAX_STALLS) throw new Error(`${m.side}: ${String(stalls)} times the pushes stopped short`);
  };
  for (let n = 0; n < WARMUP_SENDS; n += 1) {
    await send('warmup', n);
    await arrive(recipients, `warm-up ${String(n)}`);
  }
  const cpuBefore = Object.fromEntries(Object.entries(m.pids).map(([name, pid]) => [name, cpu(pid)]));
  const othersBefore = Object.fromEntries(Object.entries(ctx.others).map(([name, pid]) => [name, cpu(pid)]));
  const requestsBefore = (await fleet.stats()).requests;
  const measuredFrom = performance.now();
  for (let n = 0; n < ctx.sends; n += 1) {
    await send('sequential', n);
    await arrive(recipients, `message ${String(n)}`);
    if ((n + 1) % 5 === 0) log(`synapse/${m.side}: ${String(n + 1)} of ${String(ctx.sends)} messages pushed`);
  }
  const batchStartedAt = Date.now();
  await Promise.all(Array.from({ length: ctx.batch }, async (_, n) => send('batch', n)));
  await arrive(recipients * ctx.batch, 'the batch');
  const wallMs = performance.now() - measuredFrom;
  const measured = ctx.sends + ctx.batch;
  const perMessage = (seconds: number) => (seconds * 1000) / measured;
  const cpuMsPerMessage: Record<string, number> = {};
  for (const [name, pid] of Object.entries(m.pids)) {
    const key = name.startsWith('worker') ? 'workers' : name;
    cpuMsPerMessage[key] = (cpuMsPerMessage[key] ?? 0) + perMessage(cpu(pid) - (cpuBefore[name] ?? Number.NaN));
  }
  for (const [name, pid] of Object.entries(ctx.others))
    cpuMsPerMessage[name] = perMessage(cpu(pid) - (othersBefore[name] ?? Number.NaN));
  await sleep(SETTLE_MS);
  const stats = await fleet.stats();
  const deviceLog = await fleet.deviceLog();
  const { messages, batchLastPushMs, otherRequests } = messagesFromDeviceLog(sent, deviceLog, batchStartedAt);
  return {
    messages,
    batchLastPushMs,
    recipients,
    gatewayRequests: stats.requests - requestsBefore,
    otherRequests,
    cpuMsPerMessage,
    wallMs,
  };
}

const cpu = (pid: number | undefined) => (pid === undefined ? Number.NaN : cpuSeconds(pid));
