import { fromFile, Parser } from '@asyncapi/parser';
import { describe, expect, it } from 'vitest';
import { DEFAULT_QUEUES } from '../../src/contract/queue-names.js';
import { committedContract, CONTRACT_DIR, contractDrift, generatedContract } from '../../scripts/generate-contract.js';
import { DEFAULT_CONFIG } from '../support/default-config.js';

/**
 * contract/ is what homeservers in other languages implement the contract
 * from: generated from the definitions the workers validate and declare
 * with, and never edited by hand.
 */
describe('contract/', () => {
  it('is what `npm run contract:generate` writes from src/ now', async () => {
    // On failure: run `npm run contract:generate` and commit contract/.
    expect(contractDrift(committedContract(), await generatedContract())).toEqual([]);
  });

  it('tells which files drifted: changed, missing or left over', () => {
    const generated = new Map([
      ['a.json', '1'],
      ['b.json', '2'],
    ]);
    const committed = new Map([
      ['a.json', '1'],
      ['b.json', '3'],
      ['old.json', '4'],
    ]);
    expect(contractDrift(committed, generated)).toEqual(['b.json', 'old.json']);
    expect(contractDrift(new Map(), generated)).toEqual(['a.json', 'b.json']);
  });
});

describe('contract/asyncapi.yaml', () => {
  it('is a valid AsyncAPI 3.0 document, every payload resolved, naming every queue and exchange', async () => {
    const { document, diagnostics } = await fromFile(new Parser(), `${CONTRACT_DIR}asyncapi.yaml`).parse();
    // Severity 0 is an error, 1 a warning (2 and 3: information and hints, such as "3.1.0 exists").
    expect(
      diagnostics
        .filter((d) => {
          const severity: number = d.severity;
          return severity <= 1;
        })
        .map((d) => `${d.code}: ${d.message} at ${d.path.join('.')}`),
    ).toEqual([]);
    expect(document?.version()).toBe('3.0.0');
    const addresses =
      document
        ?.channels()
        .all()
        .map((channel) => channel.address()) ?? [];
    const { amqp, delivery } = DEFAULT_CONFIG;
    expect(addresses).toEqual(
      expect.arrayContaining([
        ...Object.values(DEFAULT_QUEUES),
        `${delivery.queue}.{partition}`,
        amqp.eventsExchange,
        amqp.deadLetterExchange,
        amqp.deadLetterQueue,
      ]),
    );
    for (const message of document?.messages().all() ?? []) {
      const payload = JSON.stringify(message.payload()?.json() ?? null);
      expect(payload, `${message.id()}: a payload, resolved`).toMatch(/"type"/);
      expect(payload, `${message.id()}: a payload, resolved`).not.toContain('$ref');
    }
  }, 120_000);
});
