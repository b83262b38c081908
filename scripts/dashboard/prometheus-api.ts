/**
 * Asking the Prometheus server of scripts/check-dashboard.ts: how many
 * scrapes it has made, and each query of the dashboard, as a row of the
 * table the check prints.
 */
import { substituteVariables, type Query } from '../monitoring-queries.js';

export interface Row {
  readonly source: string;
  readonly expr: string;
  readonly series: number | undefined;
  readonly sample: string;
  readonly error?: string;
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
export async function scrapes(api: string): Promise<number> {
  const answer = await ask(api, '/api/v1/query', { query: 'count_over_time(up[1m]) and up == 1' });
  const result = (answer.data?.result ?? []) as { value: [number, string] }[];
  if (result.length < 2) return 0;
  return Math.min(...result.map((r) => Number(r.value[1])));
}

export async function runQuery(api: string, query: Query, variables: Record<string, string>): Promise<Row> {
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
export async function runSelector(api: string, query: Query, variables: Record<string, string>): Promise<Row> {
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

export function table(rows: readonly Row[]): string {
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
