import { describe, expect, it } from 'vitest';
import {
  isExported,
  metricNames,
  panelQueries,
  parseExposition,
  readDashboard,
  readRules,
  ruleQueries,
  substituteVariables,
  variableQueries,
} from '../../scripts/monitoring-queries.js';

describe('metric names of a PromQL expression', () => {
  it.each([
    ['push_worker_requests_in_flight', ['push_worker_requests_in_flight']],
    [
      'sum by (op, queue) (rate(push_worker_requests_total{job=~"$job", outcome!="ok"}[$__rate_interval]))',
      ['push_worker_requests_total'],
    ],
    [
      'histogram_quantile(0.99, sum by (le) (rate(push_worker_request_duration_seconds_bucket{op="evaluate"}[5m])))',
      ['push_worker_request_duration_seconds_bucket'],
    ],
    ['sum(rate(a_total[5m])) / sum(rate(b_total[5m])) > 0.05 and sum(rate(b_total[5m])) > 0.1', ['a_total', 'b_total']],
    [
      'process_resident_memory_bytes > 512 * 1024 * 1024 and on (job, instance) (x_in_flight or y_in_flight)',
      ['process_resident_memory_bytes', 'x_in_flight', 'y_in_flight'],
    ],
    ['sum(x) without (instance) unless ignoring (queue) group_left (broker) y offset 5m', ['x', 'y']],
    ['absent(up{job="a"}) or max by (job) (deriv(q{queue!="dead-letter"}[10m])) > 1e3', ['up', 'q']],
    ['label_replace(m, "dst", "$1", "src", "(.*)") == bool 0x1F', ['m']],
    ['rate(x[5m:1m] @ end()) * on () group_right vector(1)', ['x']],
    ['job:requests:rate5m', ['job:requests:rate5m']],
  ])('%s', (expr, names) => {
    expect([...metricNames(expr)].sort()).toEqual([...names].sort());
  });
});

describe('the monitoring files', () => {
  it('give every panel target, query variable and alert rule an expression', () => {
    const dashboard = readDashboard();
    const panels = panelQueries(dashboard);
    expect(panels.length).toBeGreaterThan(30);
    expect(panels.every((q) => q.expr.trim() !== '' && metricNames(q.expr).size > 0)).toBe(true);
    expect(variableQueries(dashboard).map((q) => q.source)).toEqual([
      'variable job',
      'variable instance',
      'variable gateway_job',
      'variable gateway_instance',
    ]);
    expect(variableQueries(dashboard)[1]?.expr).toBe('push_worker_requests_in_flight{job=~"$job"}');
    const alerts = ruleQueries(readRules());
    expect(alerts.length).toBeGreaterThan(10);
    expect(alerts.every((q) => q.source.startsWith('alert ') && metricNames(q.expr).size > 0)).toBe(true);
  });

  it('reference their data source through ${DS_PROMETHEUS} only', () => {
    const text = JSON.stringify(readDashboard());
    const uids = [...text.matchAll(/"uid":"([^"]*)"/g)].map((m) => m[1]);
    expect(new Set(uids.filter((uid) => uid !== 'matrix-push-worker' && uid !== '-- Grafana --'))).toEqual(
      new Set(['${DS_PROMETHEUS}']),
    );
  });
});

describe('exported metrics', () => {
  const page = parseExposition(
    [
      '# HELP a_total A.',
      '# TYPE a_total counter',
      'a_total{op="x"} 3',
      '# TYPE h_seconds histogram',
      '# TYPE g gauge',
      'g 1',
      '',
    ].join('\n'),
  );

  it("are the samples, the families, and a histogram family's series", () => {
    expect(isExported('a_total', [page])).toBe(true);
    expect(isExported('g', [page])).toBe(true);
    expect(isExported('h_seconds_bucket', [page])).toBe(true);
    expect(isExported('h_seconds_count', [page])).toBe(true);
    expect(isExported('a_bucket', [page])).toBe(false);
    expect(isExported('nope', [page])).toBe(false);
  });
});

describe('variables', () => {
  it('are replaced in every form Grafana accepts, and others left alone', () => {
    expect(
      substituteVariables(
        'rate(x{job=~"$job", i=~"${instance}", k=~"${job:regex}", l="[[job]]"}[$__rate_interval]) $other',
        { job: 'w', instance: '.*', __rate_interval: '1m' },
      ),
    ).toBe('rate(x{job=~"w", i=~".*", k=~"w", l="w"}[1m]) $other');
  });
});
