/**
 * The `clients` part of `npm run bench` (issue 41): the TypeScript, Python
 * and Rust clients against the same worker, the same seeded users and the
 * same `evaluate` requests, each driven by a closed loop in its own language
 * calling its client's typed methods, next to the broker's echo of the same
 * bodies. See bench/README.md.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { PushRulesClient } from '../src/client/push-rules-client.js';
import { RpcClient } from '../src/client/rpc-client.js';
import { groupRecipientsByServer } from '../src/client/group-recipients.js';
import { loadConfig } from '../src/config/load-config.js';
import type { EvaluationEvent, EvaluationRecipient, EvaluationRoom } from '../src/evaluation/evaluation-input.js';
import { MongoPushStore } from '../src/store/mongo-push-store.js';
import { percentile, runClosedLoop } from './support/closed-loop.js';
import { evaluateEvent, evaluateRoom, recipientsOf } from './support/evaluate-load.js';
import { ROOT, startEchoConsumer, startWorker, type Child } from './support/processes.js';
import { seedUsers, UserPool } from './support/workloads.js';
import {
  CLIENT_CONCURRENCIES,
  CLIENT_OPS,
  type ClientName,
  type ClientOp,
  type ClientRow,
  type ClientsResults,
} from './support/clients-report.js';
import type { PartContext } from './support/part-context.js';

export interface ClientsContext extends PartContext {
  readonly warmupMs: number;
  readonly measureMs: number;
  /** Whether a part (`clients/get_pushrules`, `clients/evaluate`) runs. */
  readonly selected: (part: string) => boolean;
}

/** What every driver is given on stdin (the Python and Rust drivers' documented input). */
interface Workload {
  readonly op: ClientOp;
  readonly concurrency: number;
  readonly warmup_seconds: number;
  readonly measure_seconds: number;
  readonly users: readonly string[];
  readonly events: readonly EvaluationEvent[];
  readonly room: EvaluationRoom;
  readonly recipients: readonly EvaluationRecipient[];
}

/** What the Python and Rust drivers print. */
interface DriverOutput {
  readonly latencies_ms: number[];
  readonly errors: number;
  readonly first_error: string | null;
  readonly cpu_seconds: number | null;
}

const USERS = 1000;
const RECIPIENTS = 100;
/** Distinct events the evaluate callers cycle through. */
const EVENTS = 64;
const DEFAULTS = loadConfig();
const log = (line: string) => {
  console.error(line);
};

export async function runClientScenarios(ctx: ClientsContext): Promise<ClientsResults> {
  const loadAverageAtStart = os.loadavg();
  log(`clients: load average ${loadAverageAtStart.map((l) => l.toFixed(2)).join(' ')} at the start`);
  const notMeasured: Partial<Record<ClientName, string>> = {};
  const rust = buildRustDriver();
  if (!rust.startsWith('/')) notMeasured.rust = rust;
  const python = pythonVenv();
  if (!python.startsWith('/')) notMeasured.python = python;

  const queue = `bench.push.rpc.${ctx.id}.clients`;
  const database = `bench_push_${ctx.id}_clients`;
  const env = ctx.childEnv(queue, database);
  const users = new UserPool('bench', USERS);
  const store = new MongoPushStore(ctx.mongo.db(database), {
    accountDataCollection: 'account_data',
    pushersCollection: 'pushers',
  });
  await store.ensureIndexes();
  await seedUsers(store, users);
  // The recipients are seeded users (`@bench-<k>`): their stored rulesets are what the worker reads.
  const recipients = recipientsOf('bench', RECIPIENTS);
  const workload = (op: ClientOp, concurrency: number): Workload => ({
    op,
    concurrency,
    warmup_seconds: ctx.warmupMs / 1000,
    measure_seconds: ctx.measureMs / 1000,
    users: users.ids,
    events: Array.from({ length: EVENTS }, (_, i) => evaluateEvent(i)),
    room: evaluateRoom(RECIPIENTS),
    recipients,
  });

  const children: Child[] = [];
  const rows: ClientRow[] = [];
  const echoQueues = {
    get_pushrules: `bench.echo.${ctx.id}.clients.read`,
    evaluate: `bench.echo.${ctx.id}.clients.evaluate`,
  };
  try {
    children.push(await startWorker(env));
    // The floors: echo consumers on queues like the read queue and the evaluate queue.
    children.push(
      await startEchoConsumer({
        ...ctx.childEnv(echoQueues.get_pushrules, 'unused'),
        RPC_QUEUE_TYPE: DEFAULTS.amqp.readQueueType,
        RPC_PREFETCH: String(DEFAULTS.amqp.readPrefetch),
      }),
      await startEchoConsumer({
        ...ctx.childEnv(echoQueues.evaluate, 'unused'),
        RPC_QUEUE_TYPE: DEFAULTS.evaluate.queueType,
        RPC_PREFETCH: String(DEFAULTS.evaluate.prefetch),
      }),
    );
    const record = (row: ClientRow) => {
      rows.push(row);
      const ratio = row.notMeasured === undefined ? '' : `  not measured: ${row.notMeasured}`;
      const errors = row.errors > 0 ? `  errors ${row.errors} (${row.firstError ?? ''})` : '';
      log(
        `${row.id.padEnd(40)} ${Math.round(row.throughput).toString().padStart(7)}/s  p50 ${row.p50Ms.toFixed(2)} ms  p99 ${row.p99Ms.toFixed(2)} ms${errors}${ratio}`,
      );
    };
    for (const op of CLIENT_OPS) {
      if (!ctx.selected(`clients/${op}`)) continue;
      for (const concurrency of CLIENT_CONCURRENCIES) {
        const work = workload(op, concurrency);
        record(await echoRow(ctx, echoQueues[op], work));
        record(await typescriptRow(ctx, env, work, 'typescript'));
        if (op === 'evaluate') record(await typescriptRow(ctx, env, work, 'typescript-alone'));
        record(
          notMeasured.python === undefined
            ? await driverRow(work, 'python', join(python, 'bin/python'), ['-m', 'matrix_push_worker.bench'], env)
            : unmeasured(work, 'python', notMeasured.python),
        );
        record(
          notMeasured.rust === undefined
            ? await driverRow(work, 'rust', rust, [], env)
            : unmeasured(work, 'rust', notMeasured.rust),
        );
      }
    }
  } finally {
    await Promise.all(children.map(async (child) => child.stop()));
    for (const name of [queue, echoQueues.get_pushrules, echoQueues.evaluate])
      await ctx.deleteQueues(name).catch(() => undefined);
    await ctx.mongo
      .db(database)
      .dropDatabase()
      .catch(() => undefined);
  }
  return { cpus: os.cpus().length, loadAverageAtStart, rows, recipients: RECIPIENTS, users: USERS };
}

const rowId = (work: Workload, client: ClientName) => `clients/${work.op}/${client}/c${work.concurrency}`;

function unmeasured(work: Workload, client: ClientName, reason: string): ClientRow {
  return fromLatencies(work, client, [], { errors: 0, firstError: undefined, cpuSeconds: undefined }, reason);
}

function fromLatencies(
  work: Workload,
  client: ClientName,
  latencies: number[],
  rest: { errors: number; firstError: string | undefined; cpuSeconds: number | undefined },
  notMeasured?: string,
): ClientRow {
  const sorted = [...latencies].sort((a, b) => a - b);
  const throughput = sorted.length / work.measure_seconds;
  return {
    id: rowId(work, client),
    op: work.op,
    client,
    concurrency: work.concurrency,
    requests: sorted.length,
    throughput,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    errors: rest.errors,
    ...(rest.firstError === undefined ? {} : { firstError: rest.firstError }),
    ...(rest.cpuSeconds === undefined || sorted.length === 0
      ? {}
      : { clientCpuUsPerRequest: (rest.cpuSeconds * 1e6) / sorted.length }),
    ...(notMeasured === undefined ? {} : { notMeasured }),
  };
}

/** Caller `lane`'s `i`th call's user or event, as every driver picks them. */
const userOf = (work: Workload, lane: number, i: number) =>
  work.users[lane + work.concurrency * (i % Math.floor(work.users.length / work.concurrency))] ?? '';
const eventOf = (work: Workload, lane: number, i: number) =>
  work.events[(lane + i * work.concurrency) % work.events.length] ?? evaluateEvent(0);

/** A closed loop in this process, its CPU time taken over the measured window only. */
async function inProcessLoop(
  work: Workload,
  client: ClientName,
  call: (lane: number, i: number) => Promise<unknown>,
): Promise<ClientRow> {
  const cpu = { from: 0, to: 0 };
  const started = performance.now();
  const at = (ms: number, take: () => void) => setTimeout(take, Math.max(0, started + ms - performance.now()));
  const timers = [
    at(work.warmup_seconds * 1000, () => {
      const { user, system } = process.cpuUsage();
      cpu.from = user + system;
    }),
    at((work.warmup_seconds + work.measure_seconds) * 1000, () => {
      const { user, system } = process.cpuUsage();
      cpu.to = user + system;
    }),
  ];
  const loop = await runClosedLoop({
    concurrency: work.concurrency,
    warmupMs: work.warmup_seconds * 1000,
    measureMs: work.measure_seconds * 1000,
    call,
  });
  for (const timer of timers) clearTimeout(timer);
  return {
    id: rowId(work, client),
    op: work.op,
    client,
    concurrency: work.concurrency,
    requests: loop.ops,
    throughput: loop.throughput,
    p50Ms: loop.p50Ms,
    p99Ms: loop.p99Ms,
    errors: loop.errors,
    ...(loop.firstError === undefined ? {} : { firstError: loop.firstError }),
    ...(cpu.to > 0 && loop.ops > 0 ? { clientCpuUsPerRequest: (cpu.to - cpu.from) / loop.ops } : {}),
  };
}

/**
 * The broker's floor: the TypeScript `RpcClient` against the echo consumer,
 * given the very body the TypeScript client sends for the op (for
 * `evaluate`, the recipients grouped by server, `compact` and `runs`).
 */
async function echoRow(ctx: ClientsContext, queue: string, work: Workload): Promise<ClientRow> {
  const rpc = new RpcClient({ url: ctx.amqpUrl, queue });
  const grouped = groupRecipientsByServer(work.recipients)?.groups;
  try {
    return await inProcessLoop(work, 'echo', async (lane, i) => {
      const body =
        work.op === 'get_pushrules'
          ? { op: 'get_pushrules', user_id: userOf(work, lane, i) }
          : {
              op: 'evaluate',
              event: eventOf(work, lane, i),
              room: work.room,
              recipients_by_server: grouped,
              compact: true,
              runs: true,
            };
      const reply = await rpc.request(body);
      if (!reply.ok) throw new Error('echo failed');
    });
  } finally {
    await rpc.close();
  }
}

/**
 * The TypeScript client as a front or a homeserver would configure it:
 * reads routed to the read queue; `evaluate` coalesced by default
 * (`typescript`) or each call alone (`typescript-alone`), which is what
 * the Python and Rust clients' `evaluate()` does.
 */
async function typescriptRow(
  ctx: ClientsContext,
  env: NodeJS.ProcessEnv,
  work: Workload,
  client: 'typescript' | 'typescript-alone',
): Promise<ClientRow> {
  const typescript = new PushRulesClient({
    url: ctx.amqpUrl,
    queue: env['RPC_QUEUE'] ?? '',
    readQueue: env['RPC_READ_QUEUE'] ?? null,
    evaluateQueue: env['EVALUATE_QUEUE'] ?? '',
    ...(client === 'typescript-alone' ? { evaluateCoalescing: false as const } : {}),
  });
  try {
    return await inProcessLoop(work, client, async (lane, i) =>
      work.op === 'get_pushrules'
        ? typescript.getPushRules(userOf(work, lane, i))
        : typescript.evaluate(eventOf(work, lane, i), work.room, work.recipients),
    );
  } finally {
    await typescript.close();
  }
}

/** A driver in another language: the workload on stdin, one JSON line of latencies on stdout. */
async function driverRow(
  work: Workload,
  client: ClientName,
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
): Promise<ClientRow> {
  const child = spawn(command, args, { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', resolve);
  });
  child.stdin.end(JSON.stringify(work));
  const deadline = setTimeout(() => child.kill('SIGKILL'), (work.warmup_seconds + work.measure_seconds + 60) * 1000);
  try {
    const code = await exited;
    const stderr = Buffer.concat(err).toString().trim();
    if (code !== 0) return unmeasured(work, client, `the driver exited with ${String(code)}: ${stderr.slice(-500)}`);
    const output = JSON.parse(Buffer.concat(out).toString()) as DriverOutput;
    return fromLatencies(work, client, output.latencies_ms, {
      errors: output.errors,
      firstError: output.first_error ?? undefined,
      cpuSeconds: output.cpu_seconds ?? undefined,
    });
  } finally {
    clearTimeout(deadline);
  }
}

/** The Rust driver's binary, built now (release); or why it cannot be. */
function buildRustDriver(): string {
  const targetDir =
    process.env['CARGO_TARGET_DIR'] ?? join(os.homedir(), '.cache/matrix-push-worker/rust-client-target');
  log(`clients: cargo build --release --example bench (in ${targetDir}; minutes when nothing is built yet)`);
  try {
    execFileSync(
      'cargo',
      ['build', '-q', '--locked', '--release', '--manifest-path', 'clients/rust/Cargo.toml', '--example', 'bench'],
      { cwd: ROOT, env: { ...process.env, CARGO_TARGET_DIR: targetDir }, stdio: ['ignore', 'ignore', 'pipe'] },
    );
  } catch (error) {
    return `cargo build failed: ${error instanceof Error ? error.message.slice(0, 300) : String(error)}`;
  }
  const binary = join(targetDir, 'release/examples/bench');
  return existsSync(binary) ? binary : `no ${binary} after the build`;
}

/** The Python client's virtualenv (scripts/python-venv.sh installs this checkout's client in it); or why not. */
function pythonVenv(): string {
  log('clients: scripts/python-venv.sh (installs clients/python into its virtualenv)');
  try {
    return execFileSync(join(ROOT, 'scripts/python-venv.sh'), [], {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    }).trim();
  } catch (error) {
    return `scripts/python-venv.sh failed: ${error instanceof Error ? error.message.slice(0, 300) : String(error)}`;
  }
}
