import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { NOTIFY_PROPERTIES, REQUEST_PROPERTIES } from '../../scripts/contract/amqp-properties.js';
import { INTEGRATE_PAGE, propertiesTable, withPropertiesTable } from '../../scripts/contract/properties-table.js';

/**
 * docs/integrate.md's AMQP properties table is written from the lists
 * contract/asyncapi.yaml is written from, so that the page and the
 * contract cannot say two things.
 */
const page = readFileSync(new URL(`../../${INTEGRATE_PAGE}`, import.meta.url), 'utf8');

describe('the AMQP properties table of docs/integrate.md', () => {
  it('is what `npm run contract:generate` writes now', () => {
    // On failure: run `npm run contract:generate` and commit the page.
    expect(page).toBe(withPropertiesTable(page));
  });

  it('has a row for every property a request or a notify names, with what each says of it', () => {
    const table = propertiesTable();
    for (const property of [...REQUEST_PROPERTIES, ...NOTIFY_PROPERTIES]) {
      const row = table.split('\n').find((line) => line.startsWith(`| \`${property.name}\` |`));
      expect(row, property.name).toContain(`**${property.use}**: ${property.value.replaceAll('|', '\\|')}`);
    }
  });

  it('is refused for a page without its markers, which would otherwise lose it', () => {
    expect(() => withPropertiesTable('# A page without the markers\n')).toThrow(/needs the markers/);
  });

  it('replaces only what is between the markers', () => {
    const before = 'intro\n<!-- generated:amqp-properties -->\nold\n<!-- /generated:amqp-properties -->\noutro\n';
    const after = withPropertiesTable(before);
    expect(after.startsWith('intro\n<!-- generated:amqp-properties -->\n')).toBe(true);
    expect(after.endsWith('<!-- /generated:amqp-properties -->\noutro\n')).toBe(true);
    expect(after).not.toContain('\nold\n');
  });
});
