import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isHomeserverOp, isOp, isReadOp, OP_TRAITS, OPS } from '../../src/contract/ops.js';
import { DEFAULT_QUEUES } from '../../src/contract/queue-names.js';
import { REQUEST_SCHEMAS } from '../../src/contract/request-schemas.js';

/** The contract's op table (docs/rpc-contract.md), written out literally so that a change to the code fails here. */
const CONTRACT: Record<string, { readOnly: boolean; homeserverOnly: boolean }> = {
  get_pushrules: { readOnly: true, homeserverOnly: false },
  get_pushrule: { readOnly: true, homeserverOnly: false },
  set_pushrule: { readOnly: false, homeserverOnly: false },
  delete_pushrule: { readOnly: false, homeserverOnly: false },
  get_pushrule_actions: { readOnly: true, homeserverOnly: false },
  set_pushrule_actions: { readOnly: false, homeserverOnly: false },
  get_pushrule_enabled: { readOnly: true, homeserverOnly: false },
  set_pushrule_enabled: { readOnly: false, homeserverOnly: false },
  get_pushers: { readOnly: true, homeserverOnly: false },
  set_pusher: { readOnly: false, homeserverOnly: false },
  delete_pushers: { readOnly: false, homeserverOnly: true },
  delete_user_data: { readOnly: false, homeserverOnly: true },
};

const json = (file: string) =>
  JSON.parse(readFileSync(new URL(`../../config/${file}`, import.meta.url), 'utf8')) as Record<
    string,
    Record<string, unknown>
  >;

describe('the op table', () => {
  it('has one entry per schema, and every op of the contract', () => {
    expect([...OPS].sort()).toEqual(Object.keys(REQUEST_SCHEMAS).sort());
    expect(Object.keys(OP_TRAITS).sort()).toEqual(Object.keys(CONTRACT).sort());
  });

  it.each(Object.entries(CONTRACT))('%s: read-only and homeserver-only as the contract says', (op, traits) => {
    if (!isOp(op)) throw new Error(`${op} is not an op`);
    expect({ readOnly: isReadOp(op), homeserverOnly: isHomeserverOp(op) }).toEqual(traits);
  });

  it.each(['evaluate', 'get_push_rules', '__proto__', 'toString', ''])(
    '%j is not an op of the request queue',
    (name) => {
      expect(isOp(name)).toBe(false);
    },
  );
});

describe('the default queue names', () => {
  it("are the workers' defaults", () => {
    const worker = json('default.json');
    expect(DEFAULT_QUEUES).toEqual({
      request: worker['amqp']?.['queue'],
      read: worker['amqp']?.['readQueue'],
      evaluate: worker['evaluate']?.['queue'],
      deliver: worker['delivery']?.['queue'],
    });
  });

  it("are the gateway's defaults", () => {
    const gateway = json('gateway.json');
    expect({ request: gateway['amqp']?.['queue'], read: gateway['amqp']?.['readQueue'] }).toEqual({
      request: DEFAULT_QUEUES.request,
      read: DEFAULT_QUEUES.read,
    });
  });
});
