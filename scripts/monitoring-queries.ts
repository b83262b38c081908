import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

/**
 * The PromQL of the monitoring files (ops/grafana/matrix-push-worker.json,
 * ops/prometheus/alerts.yml), for the checks that hold them to what the
 * processes export: the integration test
 * test/integration/monitoring-metrics.test.ts and scripts/check-dashboard.ts.
 */

export const DASHBOARD_FILE = new URL('../ops/grafana/matrix-push-worker.json', import.meta.url);
export const ALERTS_FILE = new URL('../ops/prometheus/alerts.yml', import.meta.url);

/** One PromQL expression and where it comes from. */
export interface Query {
  /** `panel "Title" A`, `variable job`, `alert Name`. */
  readonly source: string;
  readonly expr: string;
}

interface Target {
  readonly refId?: string;
  readonly expr?: string;
}

interface Panel {
  readonly title?: string;
  readonly targets?: readonly Target[];
  readonly panels?: readonly Panel[];
}

interface Variable {
  readonly name: string;
  readonly type: string;
  readonly query?: string | { readonly query?: string };
}

interface Dashboard {
  readonly panels?: readonly Panel[];
  readonly templating?: { readonly list?: readonly Variable[] };
}

/** Every panel target's expression, rows' nested panels included. */
export function panelQueries(dashboard: Dashboard): Query[] {
  const walk = (panels: readonly Panel[]): Query[] =>
    panels.flatMap((panel) => [
      ...(panel.targets ?? []).flatMap((target) =>
        target.expr === undefined || target.expr === ''
          ? []
          : [{ source: `panel "${panel.title ?? ''}" ${target.refId ?? ''}`.trim(), expr: target.expr }],
      ),
      ...walk(panel.panels ?? []),
    ]);
  return walk(dashboard.panels ?? []);
}

/**
 * The series selector of each query variable: `label_values(sel, label)`
 * gives `sel`, `query_result(expr)` gives `expr`, a plain query is itself.
 */
export function variableQueries(dashboard: Dashboard): Query[] {
  return (dashboard.templating?.list ?? []).flatMap((variable) => {
    if (variable.type !== 'query') return [];
    const text = typeof variable.query === 'string' ? variable.query : (variable.query?.query ?? '');
    const labelValues = /^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$/s.exec(text);
    const queryResult = /^\s*query_result\((.*)\)\s*$/s.exec(text);
    const expr = labelValues?.[1] ?? queryResult?.[1] ?? text;
    return expr.trim() === '' ? [] : [{ source: `variable ${variable.name}`, expr: expr.trim() }];
  });
}

interface RuleFile {
  readonly groups?: readonly {
    readonly rules?: readonly { readonly alert?: string; readonly record?: string; readonly expr?: string }[];
  }[];
}

/** Every rule's expression. */
export function ruleQueries(rules: RuleFile): Query[] {
  return (rules.groups ?? []).flatMap((group) =>
    (group.rules ?? []).flatMap((rule) =>
      rule.expr === undefined
        ? []
        : [
            {
              source: rule.alert === undefined ? `record ${rule.record ?? ''}` : `alert ${rule.alert}`,
              expr: rule.expr,
            },
          ],
    ),
  );
}

export function readDashboard(file: URL = DASHBOARD_FILE): Dashboard {
  return JSON.parse(readFileSync(file, 'utf8')) as Dashboard;
}

export function readRules(file: URL = ALERTS_FILE): RuleFile {
  return parse(readFileSync(file, 'utf8')) as RuleFile;
}

/** Words that stand where a metric name could but are PromQL's own. */
const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'offset',
  'atan2',
  'inf',
  'nan',
]);

/**
 * The metric names an expression selects: every identifier that is not a
 * function or aggregation (those are followed by `(`), a keyword, a label
 * name (inside `{…}` or a `by (…)`-like list) or a number, duration or
 * string. Grafana's `$variables` are ignored wherever they stand.
 */
export function metricNames(expr: string): Set<string> {
  const bare = expr
    .replace(/"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/gi, ' ')
    .replace(/\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\[\[[^\]]*\]\]/g, ' ');
  const names = new Set<string>();
  for (const match of bare.matchAll(/(?<![\w.:])[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const name = match[0];
    const after = bare.slice(match.index + name.length).trimStart();
    if (after.startsWith('(') || KEYWORDS.has(name.toLowerCase())) continue;
    names.add(name);
  }
  return names;
}

/** What a `/metrics` page exports: its families (`# TYPE`) with their types, and the names of its samples. */
export interface Exported {
  readonly families: ReadonlyMap<string, string>;
  readonly samples: ReadonlySet<string>;
}

export function parseExposition(text: string): Exported {
  const families = new Map<string, string>();
  const samples = new Set<string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type !== null) families.set(type[1] ?? '', type[2] ?? '');
    else if (line !== '' && !line.startsWith('#')) samples.add(/^[^{\s]+/.exec(line)?.[0] ?? '');
  }
  return { families, samples };
}

/**
 * Whether `name` is exported by one of `pages`: a sample's name, a family
 * (a labelled metric without samples yet), or the `_bucket`, `_sum` or
 * `_count` series of a histogram or summary family.
 */
export function isExported(name: string, pages: readonly Exported[]): boolean {
  const family = /^(.*)_(?:bucket|sum|count)$/.exec(name)?.[1];
  return pages.some(
    (page) =>
      page.samples.has(name) ||
      page.families.has(name) ||
      (family !== undefined && ['histogram', 'summary'].includes(page.families.get(family) ?? '')),
  );
}

/**
 * An expression with Grafana's variables replaced (`$name`, `${name}`,
 * `${name:format}`, `[[name]]`), as Grafana would before sending it.
 */
export function substituteVariables(expr: string, values: Readonly<Record<string, string>>): string {
  const value = (name: string, whole: string) => values[name] ?? whole;
  return expr
    .replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::[^}]*)?\}/g, (whole, name: string) => value(name, whole))
    .replace(/\[\[([A-Za-z_][A-Za-z0-9_]*)\]\]/g, (whole, name: string) => value(name, whole))
    .replace(/\$([A-Za-z_][A-Za-z0-9_]*)/g, (whole, name: string) => value(name, whole));
}
