/**
 * "Renders" the Grafana dashboard without Grafana: runs every panel's
 * PromQL through a real Prometheus server scraping a worker and a gateway,
 * and prints one row per query: the panel, the expression, how many series
 * it returned and a sample value. Exits 1 when Prometheus refuses an
 * expression (or a query variable's selector); empty results are reported,
 * not failed (a panel with no traffic of its kind is empty).
 *
 *   node --import tsx scripts/check-dashboard.ts
 *       starts a worker and a gateway of its own (src/ through tsx) on
 *       AMQP_URL and MONGODB_URL (default: the local services), with queues,
 *       exchanges and a database of their own, deleted at the end, and a
 *       push gateway double on 127.0.0.1; sends them a little traffic while
 *       Prometheus scrapes (notify messages delivered through the double
 *       included)
 *   node --import tsx scripts/check-dashboard.ts --worker HOST:PORT --gateway HOST:PORT
 *       scrapes those /metrics (health.host:health.port) instead; no traffic is sent
 *
 * Prometheus is Debian's `prometheus` package (installed by
 * scripts/promtool.sh when missing), run on 127.0.0.1 with a temporary
 * configuration (scrape every second) and storage, stopped at the end.
 * Grafana's variables are replaced as Grafana would with one target each:
 * $job / $gateway_job by the jobs here, $instance / $gateway_instance by
 * the scraped addresses, $__rate_interval by 30s.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import amqp from 'amqplib';
import { MongoClient } from 'mongodb';
import { PushRulesClient } from '../src/client/push-rules-client.js';
import { PushGatewayDouble } from '../test/support/push-gateway-double.js';
import { panelQueries, readDashboard, substituteVariables, variableQueries, type Query } from './monitoring-queries.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const WORKER_JOB = 'matrix-push-worker';
const GATEWAY_JOB = 'matrix-push-gateway';
const RATE_INTERVAL = '30s';
/** How long a worker or gateway of its own may take to be ready. */
const STARTUP_MS = 60_000;

interface Row {
  readonly source: string;
  readonly expr: string;
  readonly series: number | undefined;
  readonly sample: string;
  readonly error?: string;
}

interface Started {
  readonly child: ChildProcess;
  readonly metrics: string;
  readonly port?: number;
}

const cleanups: (() => Promise<unknown>)[] = [];

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { worker: { type: 'string' }, gateway: { type: 'string' } } });
  if ((values.worker === undefined) !== (values.gateway === undefined))
    throw new Error('give both --worker and --gateway, or neither');
  const prometheus = findPrometheus();

  let targets: { worker: string; gateway: string };
  let traffic: (() => Promise<void>) | undefined;
  if (values.worker !== undefined && values.gateway !== undefined) {
    targets = { worker: values.worker, gateway: values.gateway };
  } else {
    const own = await startOwnProcesses();
    targets = { worker: own.worker.metrics, gateway: own.gateway.metrics };
    traffic = own.traffic;
  }

  const port = await freePort();
  const api = `http://127.0.0.1:${port}`;
  const dir = mkdtempSync(join(tmpdir(), 'check-dashboard-'));
  cleanups.push(async () => {
    rmSync(dir, { recursive: true, force: true });
    return Promise.resolve();
  });
  writeFileSync(
    join(dir, 'prometheus.yml'),
    [
      'global:',
      '  scrape_interval: 1s',
      '  evaluation_interval: 1s',
      'scrape_configs:',
      `  - job_name: ${WORKER_JOB}`,
      '    static_configs:',
      `      - targets: ['${targets.worker}']`,
      `  - job_name: ${GATEWAY_JOB}`,
      '    static_configs:',
      `      - targets: ['${targets.gateway}']`,
      '',
    ].join('\n'),
  );
  const server = spawn(
    prometheus,
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=error',
    ],
    { stdio: ['ignore', 'inherit', 'inherit'] },
  );
  cleanups.push(async () => stop(server));
  await waitFor(async () => (await fetch(`${api}/-/ready`)).ok, 'Prometheus to be ready', 30_000);
  log(
    `prometheus ${version(prometheus)} on ${api}, scraping ${targets.worker} (worker) and ${targets.gateway} (gateway) every second`,
  );

  // A couple of scrapes before the traffic, so that rates see it start, and a few after.
  await waitFor(async () => (await scrapes(api)) >= 2, 'two scrapes of both targets', 30_000);
  if (traffic !== undefined) await traffic();
  const after = await scrapes(api);
  await waitFor(async () => (await scrapes(api)) >= after + 3, 'three more scrapes', 30_000);

  const variables = {
    job: WORKER_JOB,
    instance: targets.worker,
    gateway_job: GATEWAY_JOB,
    gateway_instance: targets.gateway,
    __rate_interval: RATE_INTERVAL,
  };
  const dashboard = readDashboard();
  const rows: Row[] = [];
  for (const query of variableQueries(dashboard)) rows.push(await runSelector(api, query, variables));
  for (const query of panelQueries(dashboard)) rows.push(await runQuery(api, query, variables));

  process.stdout.write(table(rows));
  const failed = rows.filter((row) => row.error !== undefined);
  const empty = rows.filter((row) => row.error === undefined && row.series === 0);
  log(`${rows.length} queries: ${failed.length} refused by Prometheus, ${empty.length} with no series`);
  for (const row of failed) log(`REFUSED ${row.source}: ${row.error ?? ''}`);
  return failed.length === 0 ? 0 : 1;
}

function log(message: string): void {
  process.stderr.write(`check-dashboard: ${message}\n`);
}

function findPrometheus(): string {
  const which = () =>
    spawnSync('sh', ['-c', 'command -v prometheus || ls /usr/bin/prometheus'], { encoding: 'utf8' })
      .stdout.trim()
      .split('\n')[0] ?? '';
  if (which() === '') {
    // The same Debian package as promtool: the script installs it when it can.
    const install = spawnSync(join(ROOT, 'scripts/promtool.sh'), ['--version'], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    if (install.status !== 0 || which() === '')
      throw new Error("no prometheus server: install Debian's 'prometheus' package");
  }
  return which();
}

function version(binary: string): string {
  return /version (\S+)/.exec(spawnSync(binary, ['--version'], { encoding: 'utf8' }).stdout)?.[1] ?? '?';
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

async function waitFor(check: () => Promise<boolean>, what: string, ms: number): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    if (Date.now() > until) throw new Error(`gave up waiting for ${what}`);
    await sleep(250);
  }
}

interface ApiAnswer {
  readonly status: 'success' | 'error';
  readonly error?: string;
  readonly data?: { readonly resultType?: string; readonly result?: unknown };
}

async function ask(api: string, path: string, params: Record<string, string>): Promise<ApiAnswer> {
  const response = await fetch(`${api}${path}`, { method: 'POST', body: new URLSearchParams(params) });
  return (await response.json()) as ApiAnswer;
}

/** The fewest samples of `up` either target has in the last minute. */
async function scrapes(api: string): Promise<number> {
  const answer = await ask(api, '/api/v1/query', { query: 'count_over_time(up[1m]) and up == 1' });
  const result = (answer.data?.result ?? []) as { value: [number, string] }[];
  if (result.length < 2) return 0;
  return Math.min(...result.map((r) => Number(r.value[1])));
}

async function runQuery(api: string, query: Query, variables: Record<string, string>): Promise<Row> {
  const expr = substituteVariables(query.expr, variables);
  const answer = await ask(api, '/api/v1/query', { query: expr });
  if (answer.status !== 'success')
    return { source: query.source, expr: query.expr, series: undefined, sample: '', error: answer.error ?? 'error' };
  const result = answer.data?.result;
  if (answer.data?.resultType === 'scalar')
    return { source: query.source, expr: query.expr, series: 1, sample: formatValue((result as [number, string])[1]) };
  const vector = (result ?? []) as { metric: Record<string, string>; value: [number, string] }[];
  const first = vector[0];
  return {
    source: query.source,
    expr: query.expr,
    series: vector.length,
    sample: first === undefined ? '—' : `${formatValue(first.value[1])}${labelsOf(first.metric)}`,
  };
}

/** A variable's selector through /api/v1/series, as Grafana's label_values asks for it. */
async function runSelector(api: string, query: Query, variables: Record<string, string>): Promise<Row> {
  const match = substituteVariables(query.expr, variables);
  const response = await fetch(`${api}/api/v1/series`, {
    method: 'POST',
    body: new URLSearchParams({ 'match[]': match, start: String(Date.now() / 1000 - 300) }),
  });
  const answer = (await response.json()) as ApiAnswer;
  if (answer.status !== 'success')
    return { source: query.source, expr: query.expr, series: undefined, sample: '', error: answer.error ?? 'error' };
  const series = (answer.data as unknown as Record<string, string>[] | undefined) ?? [];
  const name = query.source.replace(/^variable /, '');
  const label = name.endsWith('job') ? 'job' : 'instance';
  return {
    source: query.source,
    expr: query.expr,
    series: series.length,
    sample: [...new Set(series.map((s) => s[label] ?? ''))].join(', ') || '—',
  };
}

function formatValue(text: string): string {
  const value = Number(text);
  if (!Number.isFinite(value)) return text;
  if (value === 0 || Number.isInteger(value)) return String(value);
  return Math.abs(value) >= 1000 || Math.abs(value) < 0.001
    ? value.toExponential(3)
    : String(Number(value.toPrecision(4)));
}

/** The labels that tell series apart in a sample (job and instance are the same everywhere here). */
function labelsOf(metric: Record<string, string>): string {
  const shown = Object.entries(metric).filter(([name]) => !['job', 'instance', '__name__'].includes(name));
  return shown.length === 0 ? '' : ` {${shown.map(([name, value]) => `${name}=${value}`).join(', ')}}`;
}

function table(rows: readonly Row[]): string {
  const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n\s*/g, ' ');
  const lines = [
    '| Panel | Expression | Series | Sample value |',
    '|---|---|---|---|',
    ...rows.map(
      (row) =>
        `| ${cell(row.source)} | \`${cell(row.expr)}\` | ${row.series === undefined ? 'ERROR' : String(row.series)} | ${cell(row.error ?? row.sample)} |`,
    ),
  ];
  return `${lines.join('\n')}\n`;
}

/** Starts `entry` through tsx and resolves once it logs `ready`, with where its metrics answer. */
async function startProcess(entry: string, env: NodeJS.ProcessEnv, ready: string): Promise<Started> {
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  cleanups.push(async () => stop(child));
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise<Started>((resolve, reject) => {
    let metrics = '';
    createInterface({ input: child.stdout }).on('line', (line) => {
      let parsed: Record<string, unknown>;
      try {
        parsed = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      if (parsed['msg'] === 'health and metrics listening') metrics = `127.0.0.1:${String(parsed['port'])}`;
      if (parsed['msg'] === ready)
        resolve({ child, metrics, ...(typeof parsed['port'] === 'number' ? { port: parsed['port'] } : {}) });
    });
    child.once('exit', (code) => {
      reject(new Error(`${entry} exited with ${String(code)} before it was ready: ${stderr}`));
    });
    setTimeout(() => {
      reject(
        new Error(
          `${entry} was not ready within ${STARTUP_MS / 1000} s (are the broker and the database up?) ${stderr}`,
        ),
      );
    }, STARTUP_MS).unref();
  });
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/** A worker and a gateway on queues and a database of their own, and the traffic to send them. */
async function startOwnProcesses(): Promise<{ worker: Started; gateway: Started; traffic: () => Promise<void> }> {
  const amqpUrl = process.env['AMQP_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672';
  const mongoUrl = process.env['MONGODB_URL'] ?? 'mongodb://127.0.0.1:27017';
  const id = randomUUID().slice(0, 8);
  const queue = `check-dashboard.${id}`;
  const names = {
    queue,
    readQueue: `${queue}.read`,
    evaluateQueue: `${queue}.evaluate`,
    deliverQueue: `${queue}.deliver`,
    deadLetterQueue: `${queue}.dead`,
    deadLetterExchange: `${queue}.dlx`,
    eventsExchange: `${queue}.events`,
    database: `check_dashboard_${id}`,
  };
  cleanups.push(async () => deleteOwnState(amqpUrl, mongoUrl, names));
  const common = {
    ...process.env,
    AMQP_URL: amqpUrl,
    RPC_QUEUE: queue,
    RPC_READ_QUEUE: names.readQueue,
    HEALTH_HOST: '127.0.0.1',
    HEALTH_PORT: '0',
    LOG_LEVEL: 'info',
  };
  // notify messages are delivered to a gateway double: the worker trusts this broker user and lets 127.0.0.1 in.
  const pushGateway = await PushGatewayDouble.start();
  cleanups.push(async () => pushGateway.close());
  const brokerUser = decodeURIComponent(new URL(amqpUrl).username) || 'guest';
  log(`starting a worker and a gateway on ${queue} and database ${names.database}`);
  const worker = await startProcess(
    'src/main.ts',
    {
      ...common,
      MONGODB_URL: mongoUrl,
      MONGODB_DATABASE: names.database,
      EVALUATE_QUEUE: names.evaluateQueue,
      DELIVERY_QUEUE: names.deliverQueue,
      TRUSTED_PUBLISHERS: brokerUser,
      PUSH_GATEWAY_IP_ALLOWLIST: '127.0.0.1/32',
      ALLOW_INSECURE_PUSH_GATEWAYS: 'true',
      RPC_DEAD_LETTER_QUEUE: names.deadLetterQueue,
      RPC_DEAD_LETTER_EXCHANGE: names.deadLetterExchange,
      EVENTS_EXCHANGE: names.eventsExchange,
    },
    'worker started',
  );
  const tokens = join(mkdtempSync(join(tmpdir(), 'check-dashboard-tokens-')), 'tokens.json');
  writeFileSync(tokens, JSON.stringify({ 'check-token': '@check:example.org', 'other-token': '@other:example.org' }));
  const gateway = await startProcess(
    'src/gateway-main.ts',
    {
      ...common,
      // The worker trusts only this publisher (for notify): the gateway publishes as it.
      AMQP_PUBLISHER_USER_ID: brokerUser,
      AUTH_KIND: 'token-file',
      AUTH_TOKEN_FILE: tokens,
      GATEWAY_HOST: '127.0.0.1',
      GATEWAY_PORT: '0',
      GATEWAY_RATE_LIMIT_WRITES_PER_SECOND: '5',
      GATEWAY_RATE_LIMIT_BURST: '5',
    },
    'gateway listening',
  );
  const http = `http://127.0.0.1:${String(gateway.port)}/_matrix/client/v3`;
  const call = async (token: string, method: string, path: string, body?: unknown) => {
    const response = await fetch(`${http}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    await response.arrayBuffer();
  };
  const traffic = async () => {
    const client = new PushRulesClient({
      url: amqpUrl,
      queue,
      readQueue: names.readQueue,
      evaluateQueue: names.evaluateQueue,
      deliverQueue: names.deliverQueue,
      publisherUserId: brokerUser,
    });
    try {
      // Devices to push to: two phones on the double, and an e-mail pusher (skipped, and counted).
      for (const pushkey of ['phone-1', 'phone-2'])
        await call('check-token', 'POST', '/pushers/set', {
          kind: 'http',
          app_id: 'org.example.check',
          pushkey,
          app_display_name: 'Check',
          device_display_name: pushkey,
          lang: 'en',
          data: { url: pushGateway.notifyUrl },
        });
      await call('check-token', 'POST', '/pushers/set', {
        kind: 'email',
        app_id: 'm.email',
        pushkey: 'check@example.org',
        app_display_name: 'E-mail',
        device_display_name: 'check@example.org',
        lang: 'en',
        data: {},
      });
      // The first request is answered 503 and retried: a failure outcome too.
      pushGateway.behave({ kind: 'status', status: 503 }, { times: 1 });
      for (let round = 0; round < 10; round += 1) {
        const token = round % 2 === 0 ? 'check-token' : 'other-token';
        await call(token, 'GET', '/pushrules/');
        await call(token, 'PUT', `/pushrules/global/content/word-${round}`, {
          pattern: `word${round}`,
          actions: ['notify'],
        });
        await call(token, 'PUT', '/pushrules/global/override/.m.rule.master/enabled', { enabled: false });
        await call(token, 'GET', '/pushrules/global/content/missing');
        await call(token, 'GET', '/pushers');
        await client.evaluate(
          {
            event_id: `$e${round}`,
            type: 'm.room.message',
            room_id: '!room:example.org',
            sender: '@sender:example.org',
            content: { msgtype: 'm.text', body: `word${round} and more` },
          },
          { member_count: 3 },
          [{ user_id: '@check:example.org' }, { user_id: '@other:example.org' }, { user_id: '@nobody:example.org' }],
        );
        await client.notify(
          {
            event_id: `$e${round}`,
            room_id: '!room:example.org',
            type: 'm.room.message',
            sender: '@sender:example.org',
            content: { msgtype: 'm.text', body: `word${round} and more` },
          },
          [{ user_id: '@check:example.org', actions: ['notify'], counts: { unread: round + 1 } }],
        );
        await sleep(300);
      }
    } finally {
      await client.close();
    }
  };
  return { worker, gateway, traffic };
}

async function deleteOwnState(
  amqpUrl: string,
  mongoUrl: string,
  names: {
    queue: string;
    readQueue: string;
    evaluateQueue: string;
    deliverQueue: string;
    deadLetterQueue: string;
    deadLetterExchange: string;
    eventsExchange: string;
    database: string;
  },
): Promise<void> {
  const connection = await amqp.connect(amqpUrl);
  const channel = await connection.createChannel();
  for (const queue of [names.queue, names.readQueue, names.evaluateQueue, names.deliverQueue, names.deadLetterQueue])
    await channel.deleteQueue(queue);
  for (const exchange of [names.deadLetterExchange, names.eventsExchange]) await channel.deleteExchange(exchange);
  await connection.close();
  const mongo = new MongoClient(mongoUrl, { serverSelectionTimeoutMS: 5_000 });
  await mongo.db(names.database).dropDatabase();
  await mongo.close();
}

async function cleanUp(): Promise<void> {
  for (const cleanup of cleanups.reverse()) {
    try {
      await cleanup();
    } catch (error) {
      log(`cleaning up: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void cleanUp().then(() => process.exit(130));
  });
}

main().then(
  async (code) => {
    await cleanUp();
    process.exit(code);
  },
  async (error: unknown) => {
    log(error instanceof Error ? error.message : String(error));
    await cleanUp();
    process.exit(2);
  },
);
