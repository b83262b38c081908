import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

/**
 * The alert rules are checked and unit-tested by promtool (Debian's
 * `prometheus` package), through scripts/promtool.sh, which installs the
 * package when promtool is missing and apt-get can (CI: root on Debian).
 * Elsewhere these two tests are skipped and say how to get promtool.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCRIPT = 'scripts/promtool.sh';
const RULES = 'ops/prometheus/alerts.yml';
const TESTS = 'ops/prometheus/alerts.test.yml';
const WHY_SKIPPED =
  'promtool is not installed and apt-get cannot install it here (it needs root on Debian or Ubuntu): ' +
  "install the 'prometheus' package, or put promtool from a Prometheus release on PATH, to run the alert rule tests";

const available = spawnSync(SCRIPT, ['--available'], { cwd: ROOT }).status === 0;
if (!available) process.stderr.write(`prometheus-rules.test.ts: skipping promtool: ${WHY_SKIPPED}\n`);

function promtool(...args: string[]): { status: number | null; output: string } {
  // Installing the package (once, when missing) may take a minute or two.
  const run = spawnSync(SCRIPT, args, { cwd: ROOT, encoding: 'utf8', timeout: 280_000 });
  return {
    status: run.status,
    output: `${run.stdout}${run.stderr}${run.error === undefined ? '' : String(run.error)}`,
  };
}

describe('Prometheus alert rules', () => {
  it(`${RULES} passes promtool check rules`, { timeout: 300_000 }, ({ skip }) => {
    skip(!available, WHY_SKIPPED);
    const { status, output } = promtool('check', 'rules', RULES);
    expect(status, output).toBe(0);
    expect(output).toContain('SUCCESS');
  });

  it(`${TESTS} passes promtool test rules`, { timeout: 300_000 }, ({ skip }) => {
    skip(!available, WHY_SKIPPED);
    const { status, output } = promtool('test', 'rules', TESTS);
    expect(status, output).toBe(0);
    expect(output).toContain('SUCCESS');
  });

  it(
    'ops/compose/prometheus.yml (docker-compose.yml) passes promtool check config',
    { timeout: 300_000 },
    ({ skip }) => {
      skip(!available, WHY_SKIPPED);
      // Syntax only: its rule file is where compose mounts it, not on this machine.
      const { status, output } = promtool('check', 'config', '--syntax-only', 'ops/compose/prometheus.yml');
      expect(status, output).toBe(0);
    },
  );

  it('every alert has a unit test in which it fires and one in which it stays quiet', () => {
    const rules = parse(readFileSync(`${ROOT}${RULES}`, 'utf8')) as { groups: { rules: { alert?: string }[] }[] };
    const alerts = rules.groups.flatMap((group) =>
      group.rules.flatMap((rule) => (rule.alert === undefined ? [] : [rule.alert])),
    );
    const tests = parse(readFileSync(`${ROOT}${TESTS}`, 'utf8')) as {
      tests: { alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[];
    };
    const cases = tests.tests.flatMap((test) => test.alert_rule_test ?? []);
    const fires = new Set(cases.filter((c) => (c.exp_alerts ?? []).length > 0).map((c) => c.alertname));
    const quiet = new Set(cases.filter((c) => (c.exp_alerts ?? []).length === 0).map((c) => c.alertname));
    expect(alerts.length).toBeGreaterThan(0);
    expect(alerts.filter((alert) => !fires.has(alert))).toEqual([]);
    expect(alerts.filter((alert) => !quiet.has(alert))).toEqual([]);
    // Every tested alert exists.
    expect([...fires, ...quiet].filter((name) => !alerts.includes(name))).toEqual([]);
  });
});
