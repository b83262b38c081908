import { setTimeout as sleep } from 'node:timers/promises';
import amqp from 'amqplib';
import type { MongoClient } from 'mongodb';
import { RpcClient } from '../src/client/rpc-client.js';
import { RpcTransportError } from '../src/client/rpc-errors.js';
import { clusterUp, killNode, startNode, waitForLeader, type ClusterNode } from '../test/support/rabbit-cluster.js';
import { startWorker, type Child } from './support/processes.js';
import type { TargetCheck } from './support/report.js';

/**
 * The failover row (issue 16): writes answered per second over a window in
 * which one node of the local three-node cluster (`scripts/services.sh
 * cluster-up`) is killed, the node that leads the request queue. Three
 * workers and the client are given every node. Each write carries a
 * `messageId` and is sent again after a transport failure or `Unavailable`
 * (as a front would); at the end every acknowledged write must be stored
 * exactly once.
 *
 * The baseline is the same run's throughput before the kill.
 */
export interface FailoverOptions {
  readonly mongo: MongoClient;
  readonly id: string;
  /** Environment of a worker on `queue` and `database`, before AMQP_URL is set to the cluster. */
  readonly workerEnv: (queue: string, database: string) => NodeJS.ProcessEnv;
  readonly workerArgs: readonly string[];
  readonly windowMs: number;
  readonly killAtMs: number;
  readonly concurrency: number;
}

export interface FailoverResult {
  readonly killed: string;
  readonly windowMs: number;
  readonly killAtMs: number;
  /** Writes answered ok per second before the kill (from the first second on). */
  readonly beforePerSecond: number;
  /** Writes answered ok per second from the first answer after the gap to the end of the window. */
  readonly afterPerSecond: number;
  /** The longest time without a write answered ok, from the kill on. */
  readonly gapMs: number;
  readonly acknowledged: number;
  /** Acknowledged writes not stored. */
  readonly lost: number;
  /** Writes stored more often than once (versions beyond one per acknowledged write). */
  readonly appliedTwice: number;
  /** Failed attempts (later retried), by reason. */
  readonly retriedBecause: Readonly<Record<string, number>>;
  /** Writes answered ok in each second of the window. */
  readonly perSecond: readonly number[];
}

const USERS = 64;

export async function runFailover(options: FailoverOptions): Promise<FailoverResult> {
  const nodes = await clusterUp();
  const urls = nodes.map((n) => n.url).join(',');
  const queue = `bench.failover.${options.id}`;
  const database = `bench_failover_${options.id}`;
  const workers: Child[] = [];
  let killed: ClusterNode | undefined;
  const client = new RpcClient({ url: urls, queue, timeoutMs: 2_000 });
  try {
    for (let i = 0; i < 3; i += 1)
      workers.push(await startWorker({ ...options.workerEnv(queue, database), AMQP_URL: urls }, options.workerArgs));
    const users = Array.from({ length: USERS }, (_, i) => `@failover${i}:bench.example.org`);
    for (const user of users) await client.request({ op: 'get_pushrules', user_id: user });

    // Found before the window: asking the cluster takes seconds, and the kill is due at killAtMs.
    const victim = await waitForLeader(queue, nodes);
    const oks: number[] = [];
    const acknowledged: { user: string; ruleId: string }[] = [];
    const retried: Record<string, number> = {};
    const started = Date.now();
    const end = started + options.windowMs;
    let next = 0;
    const caller = async () => {
      while (Date.now() < end) {
        const n = (next += 1);
        const user = users[n % USERS] ?? '';
        const ruleId = `!f${n}:bench.example.org`;
        const body = {
          op: 'set_pushrule',
          user_id: user,
          scope: 'global',
          kind: 'room',
          rule_id: ruleId,
          rule: { actions: [] },
        };
        for (let attempt = 0; ; attempt += 1) {
          let outcome: string;
          try {
            const reply = await client.request(body, { messageId: `failover-${options.id}-${n}` });
            outcome = reply.ok ? 'ok' : reply.error.kind;
          } catch (error) {
            if (!(error instanceof RpcTransportError)) throw error;
            outcome = error.reason;
          }
          if (outcome === 'ok') {
            oks.push(Date.now() - started);
            acknowledged.push({ user, ruleId });
            break;
          }
          retried[outcome] = (retried[outcome] ?? 0) + 1;
          if (attempt > 100) throw new Error(`a write failed ${attempt} times, last with ${outcome}`);
          await sleep(50);
        }
      }
    };
    const load = Promise.all(Array.from({ length: options.concurrency }, caller));
    await sleep(options.killAtMs);
    killed = victim;
    const killedAt = Date.now() - started;
    await killNode(killed);
    await load;

    const sorted = [...oks].sort((a, b) => a - b);
    let gapMs = 0;
    let resumedAt = killedAt;
    let previous = killedAt;
    for (const at of sorted.filter((t) => t >= killedAt)) {
      if (at - previous > gapMs) {
        gapMs = at - previous;
        resumedAt = at;
      }
      previous = at;
    }
    const perSecond = Array.from(
      { length: Math.ceil(options.windowMs / 1000) },
      (_, s) => sorted.filter((t) => t >= s * 1000 && t < (s + 1) * 1000).length,
    );
    const count = (from: number, to: number) => sorted.filter((t) => t >= from && t < to).length;
    const beforePerSecond = count(1_000, killedAt) / ((killedAt - 1_000) / 1000);
    const afterPerSecond = count(resumedAt, options.windowMs) / Math.max(0.001, (options.windowMs - resumedAt) / 1000);

    // Every acknowledged write stored, each once: a rule per write, and one version per write.
    const db = options.mongo.db(database);
    let lost = 0;
    let appliedTwice = 0;
    for (const user of users) {
      const doc = await db
        .collection<{ _id: string; version?: number; push_rules?: { content_json?: string } }>('account_data')
        .findOne({ _id: user });
      const content = JSON.parse(doc?.push_rules?.content_json ?? '{"global":{}}') as {
        global: Record<string, { rule_id: string }[]>;
      };
      const stored = new Set(
        Object.values(content.global)
          .flat()
          .map((r) => r.rule_id),
      );
      const mine = acknowledged.filter((a) => a.user === user);
      lost += mine.filter((a) => !stored.has(a.ruleId)).length;
      appliedTwice += Math.max(0, (doc?.version ?? 0) - 1 - mine.length);
    }
    return {
      killed: killed.name,
      windowMs: options.windowMs,
      killAtMs: killedAt,
      beforePerSecond,
      afterPerSecond,
      gapMs,
      acknowledged: acknowledged.length,
      lost,
      appliedTwice,
      retriedBecause: retried,
      perSecond,
    };
  } finally {
    await client.close();
    await Promise.all(workers.map(async (w) => w.stop()));
    if (killed !== undefined) await startNode(killed);
    await deleteFailoverTopology(nodes[0]?.url, queue);
    await options.mongo
      .db(database)
      .dropDatabase()
      .catch(() => undefined);
  }
}

async function deleteFailoverTopology(url: string | undefined, queue: string): Promise<void> {
  if (url === undefined) return;
  const connection = await amqp.connect(url);
  const channel = await connection.createChannel();
  for (const name of [queue, `${queue}.read`, `${queue}.evaluate`, `${queue}.dead`]) await channel.deleteQueue(name);
  await channel.deleteExchange(`${queue}.dlx`);
  await channel.deleteExchange(`${queue}.events`);
  await connection.close();
}

/** The issue's targets: a gap of at most 5 s, nothing lost, nothing applied twice. */
export function checkFailoverTargets(r: FailoverResult): TargetCheck[] {
  return [
    {
      target: 'failover: gap (no write answered) after a node of three is killed ≤ 5 s',
      measured: `${(r.gapMs / 1000).toFixed(2)} s`,
      met: r.gapMs <= 5_000,
    },
    {
      target: 'failover: nothing lost, nothing applied twice',
      measured: `${r.acknowledged} acknowledged; ${r.lost} lost; ${r.appliedTwice} applied twice`,
      met: r.lost === 0 && r.appliedTwice === 0,
    },
  ];
}

export function failoverMarkdown(r: FailoverResult): string {
  const ratio = r.beforePerSecond === 0 ? Number.NaN : r.afterPerSecond / r.beforePerSecond;
  const retried =
    Object.entries(r.retriedBecause)
      .map(([reason, n]) => `${reason} ${n}`)
      .join(', ') || 'none';
  return [
    '',
    "### Failover (three-node cluster, the request queue's leader killed)",
    '',
    '| window | killed | before (writes ok/s) | after | after/before | gap | acknowledged | lost | applied twice | failed attempts, retried |',
    '|---|---|---|---|---|---|---|---|---|---|',
    `| ${r.windowMs / 1000} s, kill at ${(r.killAtMs / 1000).toFixed(1)} s | ${r.killed} | ${Math.round(r.beforePerSecond)} | ${Math.round(r.afterPerSecond)} | ${Number.isNaN(ratio) ? '–' : `${(ratio * 100).toFixed(0)}%`} | ${(r.gapMs / 1000).toFixed(2)} s | ${r.acknowledged} | ${r.lost} | ${r.appliedTwice} | ${retried} |`,
    '',
    `Writes ok per second: ${r.perSecond.join(' ')}`,
  ].join('\n');
}
