// Writes the reference tables of docs/configuration.md from the settings
// schemas (the `description` of each setting, its accepted values), the
// environment lists and the default files. Run it after changing any of
// them (`npm run docs:config`); test/docs/configuration-docs.test.ts fails
// while the page differs from what this would write.
//
//   node --import tsx scripts/generate-config-docs.ts           rewrite the page
//   node --import tsx scripts/generate-config-docs.ts --check   exit 1 if it is out of date
//
// Only the text between the markers <!-- generated:NAME --> and
// <!-- /generated:NAME --> is replaced; the prose around them is kept.
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import type { EnvironmentList } from '../src/config/load-config.js';
import { ConfigSchema } from '../src/config/config-schema.js';
import { ENVIRONMENT } from '../src/config/worker-environment.js';
import { GATEWAY_ENVIRONMENT, GatewayConfigSchema } from '../src/gateway/gateway-config.js';

/** The parts of a JSON schema that the tables show. */
interface SchemaNode {
  readonly type?: string;
  readonly description?: string;
  readonly properties?: Readonly<Record<string, SchemaNode>>;
  readonly anyOf?: readonly SchemaNode[];
  readonly items?: SchemaNode;
  readonly const?: unknown;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly minItems?: number;
  readonly maxItems?: number;
  readonly uniqueItems?: boolean;
  readonly pattern?: string;
}

/** One process's settings: what the tables are made of. */
export interface SettingsSource {
  /** The marker name in the page: `worker` or `gateway`. */
  readonly name: string;
  readonly schema: SchemaNode;
  readonly environment: EnvironmentList;
  /** Path of the default file, from the repository's root. */
  readonly defaultFile: string;
  /** Path of the schema's source, from the repository's root. */
  readonly schemaFile: string;
}

export const SOURCES: readonly SettingsSource[] = [
  {
    name: 'worker',
    schema: ConfigSchema,
    environment: ENVIRONMENT,
    defaultFile: 'config/default.json',
    schemaFile: 'src/config/config-schema.ts',
  },
  {
    name: 'gateway',
    schema: GatewayConfigSchema,
    environment: GATEWAY_ENVIRONMENT,
    defaultFile: 'config/gateway.json',
    schemaFile: 'src/gateway/gateway-config.ts',
  },
];

export const PAGE = 'docs/configuration.md';

/** One row of a table: a setting of the file, and the variable that overrides it (if any). */
export interface SettingRow {
  readonly variable: string | undefined;
  readonly setting: string;
  readonly default: string;
  readonly values: string;
  readonly meaning: string;
}

type Defaults = Readonly<Record<string, Readonly<Record<string, unknown>> | undefined>>;

/** Every setting of `source.schema`, in the schema's order. Throws on a setting without a description or a default. */
export function settingRows(source: SettingsSource, defaults: Defaults): SettingRow[] {
  const rows: SettingRow[] = [];
  for (const [section, sectionSchema] of Object.entries(source.schema.properties ?? {})) {
    for (const [key, schema] of Object.entries(sectionSchema.properties ?? {})) {
      const setting = `${section}.${key}`;
      if (schema.description === undefined || schema.description === '') {
        throw new Error(`${source.schemaFile}: ${setting} has no description`);
      }
      const value = defaults[section]?.[key];
      if (value === undefined) throw new Error(`${source.defaultFile}: no default for ${setting}`);
      const variables = source.environment.filter((v) => v.path.join('.') === setting).map((v) => v.name);
      if (variables.length > 1) throw new Error(`${setting} has more than one variable: ${variables.join(', ')}`);
      rows.push({
        variable: variables[0],
        setting,
        default: defaultText(value),
        values: valuesText(schema),
        meaning: schema.description,
      });
    }
  }
  const unknown = source.environment.filter((v) => !rows.some((r) => r.setting === v.path.join('.')));
  if (unknown.length > 0) throw new Error(`variables of no setting: ${unknown.map((v) => v.name).join(', ')}`);
  return rows;
}

/** A default as the table shows it: in backticks, a list comma-separated (as its variable takes it), nothing as `empty`. */
export function defaultText(value: unknown): string {
  const text = Array.isArray(value) ? value.map(String).join(',') : String(value);
  return text === '' ? 'empty' : `\`${text}\``;
}

/** What the schema accepts, in words. */
export function valuesText(schema: SchemaNode): string {
  if (schema.anyOf !== undefined) {
    const options = schema.anyOf;
    if (options.every((o) => o.const !== undefined))
      return `one of ${options.map((o) => `\`${String(o.const)}\``).join(', ')}`;
    const [single, list] = options;
    if (
      options.length === 2 &&
      single !== undefined &&
      list?.type === 'array' &&
      JSON.stringify(list.items) === JSON.stringify(single)
    ) {
      return `${valuesText(single)}; or a list of ${range(list.minItems, list.maxItems)} of them`;
    }
    return options.map(valuesText).join('; or ');
  }
  switch (schema.type) {
    case 'integer':
      return `integer, ${range(schema.minimum, schema.maximum)}`;
    case 'boolean':
      return '`true` or `false`';
    case 'string': {
      if (schema.pattern !== undefined) return `text matching \`${schema.pattern}\``;
      if (schema.maxLength !== undefined) return `text, ${range(schema.minLength, schema.maxLength)} characters`;
      return schema.minLength === undefined ? 'text' : 'text, not empty';
    }
    case 'array': {
      const items = schema.items === undefined ? 'anything' : valuesText(schema.items);
      const count =
        schema.minItems !== undefined || schema.maxItems !== undefined
          ? ` of ${range(schema.minItems, schema.maxItems)}`
          : '';
      return `a list${count} (each: ${items})${schema.uniqueItems === true ? ', no repeats' : ''}`;
    }
    default:
      throw new Error(`no words for a schema of type ${String(schema.type)}`);
  }
}

function range(min: number | undefined, max: number | undefined): string {
  if (max === undefined) return `at least ${String(min)}`;
  return min === undefined ? `at most ${max}` : `${min}–${max}`;
}

/** The text between one pair of markers: the table of one process's settings. */
export function settingsTable(source: SettingsSource, defaults: Defaults): string {
  const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');
  const lines = [
    `<!-- Written by scripts/generate-config-docs.ts (npm run docs:config) from ${source.schemaFile} and ${source.defaultFile}: edit those, not this table. -->`,
    '',
    '| Variable | Setting | Default | Values | Meaning |',
    '|---|---|---|---|---|',
    ...settingRows(source, defaults).map(
      (r) =>
        `| ${r.variable === undefined ? '— (file only)' : `\`${r.variable}\``} | \`${r.setting}\` | ${cell(r.default)} | ${cell(r.values)} | ${cell(r.meaning)} |`,
    ),
  ];
  return lines.join('\n');
}

/**
 * The page with every generated block replaced: pure, so that the test can
 * compare its result with the page as committed.
 */
export function renderPage(page: string, tables: Readonly<Record<string, string>>): string {
  let result = page;
  for (const [name, table] of Object.entries(tables)) {
    const open = `<!-- generated:${name} -->`;
    const close = `<!-- /generated:${name} -->`;
    const start = result.indexOf(open);
    const end = result.indexOf(close);
    if (start < 0 || end < start) throw new Error(`${PAGE} needs the markers ${open} and ${close}, in that order`);
    result = `${result.slice(0, start + open.length)}\n${table}\n${result.slice(end)}`;
  }
  return result;
}

/** Reads a file of the repository by its path from the root. */
export function readRepositoryFile(path: string): string {
  return readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
}

/** The page as the generator would write it now, from the files as they are. */
export function generatedPage(): string {
  const tables = Object.fromEntries(
    SOURCES.map((source) => [
      source.name,
      settingsTable(source, JSON.parse(readRepositoryFile(source.defaultFile)) as Defaults),
    ]),
  );
  return renderPage(readRepositoryFile(PAGE), tables);
}

function main(args: readonly string[]): void {
  const current = readRepositoryFile(PAGE);
  const next = generatedPage();
  if (args.includes('--check')) {
    if (next !== current) {
      console.error(`${PAGE} is out of date: run npm run docs:config`);
      process.exit(1);
    }
    console.log(`${PAGE} is up to date`);
    return;
  }
  if (next === current) {
    console.log(`${PAGE}: unchanged`);
    return;
  }
  writeFileSync(new URL(`../${PAGE}`, import.meta.url), next);
  console.log(`${PAGE}: tables written`);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href)
  main(process.argv.slice(2));
