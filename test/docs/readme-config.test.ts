import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { EnvironmentList } from '../../src/config/load-config.js';
import { ENVIRONMENT } from '../../src/config/config-schema.js';
import { GATEWAY_ENVIRONMENT } from '../../src/gateway/gateway-config.js';

/**
 * The README's configuration tables are documentation operators act on:
 * every variable must be there, under its setting, with the default the
 * configuration file really has.
 */
const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

interface Row {
  readonly variable: string;
  readonly setting: string;
  readonly default: string;
}

/** The rows of the first table after `heading`; a cell `A` / `B` holds two rows. */
function tableAfter(heading: string): Row[] {
  const start = README.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`README has no heading ${heading}`);
  const lines = README.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('| Variable |'));
  const rows: Row[] = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    const [variables = '', settings = '', defaults = ''] = line.split(' | ').map((cell) => cell.replace(/^\| ?| ?\|$/g, ''));
    const names = [...variables.matchAll(/`([A-Z0-9_]+)`/g)].map((m) => m[1] ?? '');
    const paths = [...settings.matchAll(/`([a-z][A-Za-z]*\.[A-Za-z]+)`/g)].map((m) => m[1] ?? '');
    const values = defaults.split(' / ').map((v) => (v.startsWith('empty') ? '' : v.replace(/^`|`$/g, '')));
    names.forEach((variable, i) => rows.push({ variable, setting: paths[i] ?? '', default: values[i] ?? '' }));
  }
  return rows;
}

function defaultOf(file: string, path: readonly [string, string]): string {
  const config = JSON.parse(readFileSync(new URL(`../../config/${file}`, import.meta.url), 'utf8')) as Record<string, Record<string, unknown>>;
  const value = config[path[0]]?.[path[1]];
  return Array.isArray(value) ? value.join(',') : String(value);
}

describe.each<[string, string, EnvironmentList]>([
  ['## Configuration', 'default.json', ENVIRONMENT],
  ['### Gateway configuration', 'gateway.json', GATEWAY_ENVIRONMENT],
])('README table under %s', (heading, file, environment) => {
  const rows = tableAfter(heading);

  it('lists exactly the variables the process reads', () => {
    expect(rows.map((r) => r.variable).sort()).toEqual(environment.map((v) => v.name).sort());
  });

  it.each(environment.map((v) => [v.name, v] as const))('%s: setting and default as in the file', (_name, variable) => {
    const row = rows.find((r) => r.variable === variable.name);
    expect(row?.setting).toBe(variable.path.join('.'));
    expect(row?.default).toBe(defaultOf(file, variable.path));
  });
});
