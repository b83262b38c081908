// The AMQP properties table of docs/integrate.md, written from the same
// lists as contract/asyncapi.yaml (amqp-properties.ts), so that the page
// and the contract cannot say two things. `npm run contract:generate`
// rewrites it between the page's markers; test/docs/amqp-properties-table.test.ts
// fails while it differs.
import { NOTIFY_PROPERTIES, REPLY_PROPERTIES, REQUEST_PROPERTIES, type AmqpProperty } from './amqp-properties.js';

/** The page the table lives in, from the repository's root. */
export const INTEGRATE_PAGE = 'docs/integrate.md';

const OPEN = '<!-- generated:amqp-properties -->';
const CLOSE = '<!-- /generated:amqp-properties -->';

const COLUMNS = [
  { title: 'On a request (request, read, evaluate queues)', properties: REQUEST_PROPERTIES },
  { title: 'On a `notify` (delivery queue)', properties: NOTIFY_PROPERTIES },
  { title: 'On a reply', properties: REPLY_PROPERTIES },
] as const;

const cell = (property: AmqpProperty | undefined): string =>
  property === undefined ? '—' : `**${property.use}**: ${property.value}`.replaceAll('|', '\\|');

/** The table: one row per property any of the three messages names, in the order they first name it. */
export function propertiesTable(): string {
  const names = [...new Set(COLUMNS.flatMap((column) => column.properties.map((property) => property.name)))];
  const rows = names.map((name) => {
    const cells = COLUMNS.map((column) => cell(column.properties.find((property) => property.name === name)));
    return `| \`${name}\` | ${cells.join(' | ')} |`;
  });
  return [
    '<!-- Written by scripts/contract/properties-table.ts (npm run contract:generate) from scripts/contract/amqp-properties.ts, as contract/asyncapi.yaml: edit that, not this table. -->',
    '',
    `| Property | ${COLUMNS.map((column) => column.title).join(' | ')} |`,
    `|---|${COLUMNS.map(() => '---').join('|')}|`,
    ...rows,
  ].join('\n');
}

/** `page` with the text between the markers replaced by the table; an error when the markers are missing. */
export function withPropertiesTable(page: string): string {
  const start = page.indexOf(OPEN);
  const end = page.indexOf(CLOSE);
  if (start < 0 || end < start)
    throw new Error(`${INTEGRATE_PAGE} needs the markers ${OPEN} and ${CLOSE}, in that order`);
  return `${page.slice(0, start + OPEN.length)}\n${propertiesTable()}\n${page.slice(end)}`;
}
