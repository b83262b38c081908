import type { TargetCheck } from './report.js';

export const CLIENT_OPS = ['get_pushrules', 'evaluate'] as const;
export type ClientOp = (typeof CLIENT_OPS)[number];
export const CLIENT_CONCURRENCIES = [1, 64] as const;
/** `echo`: the TypeScript `RpcClient` against the echo consumer; `typescript-alone`: `evaluateCoalescing: false`. */
export type ClientName = 'echo' | 'typescript' | 'typescript-alone' | 'python' | 'rust';

export interface ClientRow {
  readonly id: string;
  readonly op: ClientOp;
  readonly client: ClientName;
  readonly concurrency: number;
  /** Calls that started and ended in the measured window. */
  readonly requests: number;
  readonly throughput: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly errors: number;
  readonly firstError?: string;
  /** The CPU time of the caller's process in the measured window, per answered call. */
  readonly clientCpuUsPerRequest?: number;
  /** Why the row has no figures (no toolchain, a driver that failed). */
  readonly notMeasured?: string;
}

export interface ClientsResults {
  readonly cpus: number;
  readonly loadAverageAtStart: readonly number[];
  readonly rows: readonly ClientRow[];
  readonly recipients: number;
  readonly users: number;
}

/** Issue 41's targets: c = 1 p50 ÷ the TypeScript client's, and c = 64 rate ÷ the TypeScript client's. */
export const P50_TARGETS: Readonly<Record<'rust' | 'python', number>> = { rust: 1.1, python: 1.5 };
export const RATE_TARGET = 0.8;

const find = (rows: readonly ClientRow[], op: ClientOp, client: ClientName, concurrency: number) =>
  rows.find((r) => r.op === op && r.client === client && r.concurrency === concurrency && r.notMeasured === undefined);

const ms = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : '–');
const ratio = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : '–');
const count = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–');

export function checkClientTargets(results: ClientsResults): TargetCheck[] {
  const checks: TargetCheck[] = [];
  for (const op of new Set(results.rows.map((r) => r.op))) {
    for (const client of ['rust', 'python'] as const) {
      const bound = P50_TARGETS[client];
      const mine = find(results.rows, op, client, 1);
      const ts = find(results.rows, op, 'typescript', 1);
      const target = `${client} \`${op}\` p50 at c = 1 ≤ ${bound} × the TypeScript client's`;
      if (mine === undefined || ts === undefined) {
        checks.push({ target, measured: 'not measured', met: false, unjudged: true });
      } else {
        const r = mine.p50Ms / ts.p50Ms;
        checks.push({
          target,
          measured: `${ms(mine.p50Ms)} ms ÷ ${ms(ts.p50Ms)} ms = ${ratio(r)}`,
          met: mine.errors === 0 && r <= bound,
        });
      }
      for (const reference of op === 'evaluate'
        ? (['typescript', 'typescript-alone'] as const)
        : (['typescript'] as const)) {
        const mine64 = find(results.rows, op, client, 64);
        const ts64 = find(results.rows, op, reference, 64);
        const what =
          reference === 'typescript' ? "the TypeScript client's" : "the TypeScript client's without coalescing";
        const rateTarget = `${client} \`${op}\` req/s at c = 64 ≥ ${RATE_TARGET} × ${what}`;
        if (mine64 === undefined || ts64 === undefined) {
          checks.push({ target: rateTarget, measured: 'not measured', met: false, unjudged: true });
        } else {
          const r = mine64.throughput / ts64.throughput;
          checks.push({
            target: rateTarget,
            measured: `${count(mine64.throughput)} ÷ ${count(ts64.throughput)} = ${ratio(r)}`,
            met: mine64.errors === 0 && r >= RATE_TARGET,
          });
        }
      }
    }
  }
  return checks;
}

/** One table per op: every client at each c, with its ratios to the TypeScript client and to the echo. */
export function clientsMarkdown(results: ClientsResults): string {
  const lines = [
    '',
    `## Clients (issue 41): ${results.users.toLocaleString('en-US')} seeded users, \`evaluate\` to ${results.recipients} of them`,
    '',
    `Load average at the start: ${results.loadAverageAtStart.map((l) => l.toFixed(2)).join(' ')} (${results.cpus} CPUs).`,
  ];
  for (const op of new Set(results.rows.map((r) => r.op))) {
    lines.push(
      '',
      `### \`${op}\``,
      '',
      '| client | c | req/s | p50 ms | p99 ms | p50 ÷ TS | req/s ÷ TS | req/s ÷ echo | client CPU µs/req | errors |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    );
    for (const row of results.rows.filter((r) => r.op === op)) {
      if (row.notMeasured !== undefined) {
        lines.push(
          `| ${row.client} | ${row.concurrency} | not measured: ${row.notMeasured.replace(/\|/g, '/').replace(/\n/g, ' ')} | | | | | | | |`,
        );
        continue;
      }
      const ts = find(results.rows, op, 'typescript', row.concurrency);
      const echo = find(results.rows, op, 'echo', row.concurrency);
      const errors = row.errors === 0 ? '0' : `${row.errors} (${(row.firstError ?? '').replace(/\|/g, '/')})`;
      lines.push(
        `| ${row.client} | ${row.concurrency} | ${count(row.throughput)} | ${ms(row.p50Ms)} | ${ms(row.p99Ms)} | ${
          ts === undefined ? '–' : ratio(row.p50Ms / ts.p50Ms)
        } | ${ts === undefined ? '–' : ratio(row.throughput / ts.throughput)} | ${
          echo === undefined ? '–' : ratio(row.throughput / echo.throughput)
        } | ${row.clientCpuUsPerRequest === undefined ? '–' : count(row.clientCpuUsPerRequest)} | ${errors} |`,
      );
    }
  }
  return lines.join('\n');
}
