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
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { cleanUp, cleanups, stop } from './dashboard/cleanups.js';
import { log } from './dashboard/log.js';
import { startOwnProcesses } from './dashboard/own-processes.js';
import { runQuery, runSelector, scrapes, table, type Row } from './dashboard/prometheus-api.js';
import { panelQueries, readDashboard, variableQueries } from './monitoring-queries.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const WORKER_JOB = 'matrix-push-worker';
const GATEWAY_JOB = 'matrix-push-gateway';
const RATE_INTERVAL = '30s';

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
