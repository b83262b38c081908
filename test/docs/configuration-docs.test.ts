import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { generatedPage, PAGE, settingRows, SOURCES, valuesText } from '../../scripts/generate-config-docs.js';

/**
 * docs/configuration.md is what operators set the processes up from: its
 * tables are generated from the schemas and the default files, and must
 * not drift from them.
 */
const page = readFileSync(new URL(`../../${PAGE}`, import.meta.url), 'utf8');

interface Row {
  readonly variable: string;
  readonly setting: string;
  readonly default: string;
}

/** The rows between the markers of `name`, read back from the page as a reader sees them. */
function rowsOf(name: string): Row[] {
  const start = page.indexOf(`<!-- generated:${name} -->`);
  const end = page.indexOf(`<!-- /generated:${name} -->`);
  expect(start, `markers of ${name}`).toBeGreaterThanOrEqual(0);
  return page
    .slice(start, end)
    .split('\n')
    .filter((line) => line.startsWith('| ') && !line.startsWith('| Variable |'))
    .map((line) => {
      const [variable = '', setting = '', value = ''] = line
        .slice(2, -2)
        .split(/ (?<!\\)\| /)
        .map((cell) => cell.trim());
      return {
        variable: /^`([A-Z0-9_]+)`$/.exec(variable)?.[1] ?? '',
        setting: setting.replace(/^`|`$/g, ''),
        default: value === 'empty' ? '' : value.replace(/^`|`$/g, ''),
      };
    });
}

function defaultOf(file: string, setting: string): string {
  const config = JSON.parse(readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8')) as Record<
    string,
    Record<string, unknown>
  >;
  const [section = '', key = ''] = setting.split('.');
  const value = config[section]?.[key];
  return Array.isArray(value) ? value.join(',') : String(value);
}

describe('docs/configuration.md', () => {
  it('is what `npm run docs:config` writes from the schemas and default files now', () => {
    // On failure: run `npm run docs:config` and commit the page.
    expect(page).toBe(generatedPage());
  });

  describe.each(SOURCES.map((source) => [source.name, source] as const))('the %s table', (name, source) => {
    const rows = rowsOf(name);

    it('lists exactly the variables the process reads', () => {
      const listed = rows.map((r) => r.variable).filter((v) => v !== '');
      expect(listed.sort()).toEqual(source.environment.map((v) => v.name).sort());
    });

    it.each(source.environment.map((v) => [v.name, v] as const))(
      '%s: setting and default as in the file',
      (variable, { path }) => {
        const row = rows.find((r) => r.variable === variable);
        expect(row?.setting).toBe(path.join('.'));
        expect(row?.default).toBe(defaultOf(source.defaultFile, path.join('.')));
      },
    );

    it('lists every setting of the schema, those without a variable too', () => {
      const schema = source.schema as { properties: Record<string, { properties: Record<string, unknown> }> };
      const settings = Object.entries(schema.properties).flatMap(([section, s]) =>
        Object.keys(s.properties).map((key) => `${section}.${key}`),
      );
      expect(rows.map((r) => r.setting)).toEqual(settings);
    });
  });
});

describe('the generator', () => {
  const source = { name: 'test', environment: [], defaultFile: 'defaults.json', schemaFile: 'schema.ts' };

  it('refuses a setting without a description', () => {
    const schema = { properties: { log: { properties: { level: { type: 'string' } } } } };
    expect(() => settingRows({ ...source, schema }, { log: { level: 'info' } })).toThrow(
      'schema.ts: log.level has no description',
    );
  });

  it('refuses a setting without a default', () => {
    const schema = { properties: { log: { properties: { level: { type: 'string', description: 'Level.' } } } } };
    expect(() => settingRows({ ...source, schema }, { log: {} })).toThrow('defaults.json: no default for log.level');
  });

  it('words what a schema accepts', () => {
    expect(valuesText({ type: 'integer', minimum: 0, maximum: 10 })).toBe('integer, 0–10');
    expect(valuesText({ anyOf: [{ const: 'a' }, { const: 'b' }] })).toBe('one of `a`, `b`');
    expect(valuesText({ type: 'string', minLength: 1 })).toBe('text, not empty');
    expect(
      valuesText({
        anyOf: [
          { type: 'string', maxLength: 9 },
          { type: 'array', items: { type: 'string', maxLength: 9 }, minItems: 1, maxItems: 3 },
        ],
      }),
    ).toBe('text, at most 9 characters; or a list of 1–3 of them');
  });
});
