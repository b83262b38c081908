import { describe, expect, it } from 'vitest';
import { mapUser, pushkeyTag, type SynapseUserRows } from '../../src/import/map-user.js';
import { ALICE } from '../support/builders.js';
import { aPusherRow, aRuleRow } from '../support/synapse-rows.js';

const STRICT = { allowInsecureGateways: false };

function rowsOf(overrides: Partial<SynapseUserRows> = {}): SynapseUserRows {
  return { userId: ALICE, known: true, rules: [aRuleRow()], enables: [], pushers: [aPusherRow()], ...overrides };
}

describe('mapUser', () => {
  it('gives the ruleset, the pushers with their pushkey time, and the rule rows imported', () => {
    const mapped = mapUser(rowsOf(), STRICT);
    expect(mapped.ruleset?.override.map((rule) => rule.rule_id)).toContain('my.rule');
    expect(mapped.pushers).toEqual([expect.objectContaining({ pushkey: 'pushkey-1', ts: 1_700_000_000_000 })]);
    expect(mapped).toMatchObject({ rules: 1, skipped: [], notes: [] });
  });

  it('reports a skipped pusher by app ID and a tag of its pushkey, never the pushkey', () => {
    const mapped = mapUser(rowsOf({ pushers: [aPusherRow({ pushkey: 'secret-device-token', data: null })] }), STRICT);
    expect(mapped.skipped).toEqual([
      {
        table: 'pushers',
        reason: 'unparsable-json',
        detail: 'data is NULL',
        appId: 'org.example.app',
        pushkeyTag: pushkeyTag('secret-device-token'),
      },
    ]);
    expect(JSON.stringify(mapped)).not.toContain('secret-device-token');
  });

  it('counts only the rule rows imported, and notes a pusher whose lang was NULL', () => {
    const mapped = mapUser(
      rowsOf({
        rules: [aRuleRow(), aRuleRow({ rule_id: 'global/override/bad', priority: 1, actions: '{' })],
        pushers: [aPusherRow({ lang: null })],
      }),
      STRICT,
    );
    expect(mapped.rules).toBe(1);
    expect(mapped.notes).toEqual([{ kind: 'lang-was-null', appId: 'org.example.app' }]);
  });

  it.each([
    ['named with --users, unknown to Synapse', rowsOf({ known: false }), 'unknown-user'],
    ['a user ID this service refuses', rowsOf({ userId: 'alice', rules: [], pushers: [] }), 'invalid-user-id'],
  ] as const)('skips a user %s whole', (_name, rows, reason) => {
    const mapped = mapUser(rows, STRICT);
    expect(mapped.ruleset).toBeUndefined();
    expect(mapped.pushers).toEqual([]);
    expect(mapped.skipped).toEqual([expect.objectContaining({ table: 'users', reason })]);
  });

  it.each([
    ['', 'e3b0c442'],
    ['abc', 'ba7816bf'],
  ])('tags pushkey %j as %s (SHA-256)', (pushkey, tag) => {
    expect(pushkeyTag(pushkey)).toBe(tag);
  });
});
