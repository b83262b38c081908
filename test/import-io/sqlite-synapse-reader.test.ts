import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SynapseUserRows } from '../../src/import/map-user.js';
import { SqliteSynapseReader } from '../../src/import-io/sqlite-synapse-reader.js';
import { SourceError } from '../../src/import-io/synapse-reader.js';
import { aPusherRow, aRuleRow, anEnableRow } from '../support/synapse-rows.js';
import { writeSynapseSqlite } from '../support/synapse-sqlite.js';

let dir: string;
let path: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'synapse-sqlite-'));
  path = join(dir, 'homeserver.db');
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const user = (n: number) => `@u${String(n).padStart(3, '0')}:example.org`;

async function readAll(reader: SqliteSynapseReader, batchSize: number, users?: readonly string[]) {
  const batches: (readonly SynapseUserRows[])[] = [];
  for await (const batch of reader.batches(batchSize, users)) batches.push(batch);
  return batches;
}

describe('SqliteSynapseReader', () => {
  it('reads every user with a rule, an enable row or a pusher, once, in batches by user ID', async () => {
    writeSynapseSqlite(path, {
      users: [user(1), user(2), user(3), user(4), user(5)],
      rules: [aRuleRow({ user_name: user(3) }), aRuleRow({ user_name: user(3), rule_id: 'global/override/b' })],
      enables: [{ ...anEnableRow('global/override/.m.rule.master', 1), user_name: user(1) }],
      pushers: [aPusherRow({ user_name: user(5) }), aPusherRow({ user_name: user(3), pushkey: 'k' })],
    });
    const reader = SqliteSynapseReader.open(path);
    expect(await reader.countUsers()).toBe(3);
    const batches = await readAll(reader, 2);
    expect(batches.map((batch) => batch.map((rows) => rows.userId))).toEqual([[user(1), user(3)], [user(5)]]);
    const third = batches[0]?.[1];
    expect(third?.rules.map((row) => row.rule_id)).toEqual(['global/override/my.rule', 'global/override/b']);
    expect(third?.pushers).toEqual([{ ...aPusherRow({ user_name: user(3), pushkey: 'k' }), access_token: 7 }]);
    expect(batches[0]?.[0]?.enables).toEqual([
      { ...anEnableRow('global/override/.m.rule.master', 1), user_name: user(1) },
    ]);
    await reader.close();
  });

  it('gives each batch exactly its users\u2019 pushers from the one sorted pass, in the byte order of UTF-8', async () => {
    // U+FF5E sorts before U+1F600 in UTF-8 bytes, after it in UTF-16 code units.
    const wide = '@a\uff5e:example.org';
    const emoji = '@a\u{1f600}:example.org';
    writeSynapseSqlite(path, {
      users: [user(1), wide, emoji],
      rules: [aRuleRow({ user_name: user(1) })],
      pushers: [
        aPusherRow({ user_name: emoji, pushkey: 'e' }),
        aPusherRow({ user_name: wide, pushkey: 'w' }),
        aPusherRow({ user_name: user(1), pushkey: 'u2' }),
        aPusherRow({ user_name: user(1), pushkey: 'u1', app_id: 'other' }),
      ],
    });
    const reader = SqliteSynapseReader.open(path);
    const batches = await readAll(reader, 1);
    expect(batches.map((batch) => batch.map((rows) => [rows.userId, rows.pushers.map((p) => p.pushkey)]))).toEqual([
      [[wide, ['w']]],
      [[emoji, ['e']]],
      [[user(1), ['u2', 'u1']]],
    ]);
    await reader.close();
  });

  it('reads the users named, in their order; one Synapse does not know comes as unknown, one without rows with none', async () => {
    writeSynapseSqlite(path, { users: [user(1), user(2)], rules: [aRuleRow({ user_name: user(2) })] });
    const reader = SqliteSynapseReader.open(path);
    const [batch] = await readAll(reader, 10, [user(2), user(9), user(1)]);
    expect(batch?.map((rows) => [rows.userId, rows.known, rows.rules.length])).toEqual([
      [user(2), true, 1],
      [user(9), false, 0],
      [user(1), true, 0],
    ]);
    await reader.close();
  });

  it('reads a schema from before Synapse 1.69 (pushers without enabled and device_id)', async () => {
    writeSynapseSqlite(path, { users: [user(1)], pushers: [aPusherRow({ user_name: user(1) })], oldPushers: true });
    const reader = SqliteSynapseReader.open(path);
    const [batch] = await readAll(reader, 10);
    expect(batch?.[0]?.pushers[0]).not.toHaveProperty('enabled');
    expect(batch?.[0]?.pushers[0]).not.toHaveProperty('device_id');
    await reader.close();
  });

  it('reads one snapshot: rows Synapse writes after it opened are not seen', async () => {
    writeSynapseSqlite(path, { users: [user(1)], rules: [aRuleRow({ user_name: user(1) })] });
    const synapse = new DatabaseSync(path);
    synapse.exec('PRAGMA journal_mode = WAL');
    const reader = SqliteSynapseReader.open(path);
    synapse.prepare("INSERT INTO push_rules VALUES (99, ?, 'global/override/late', 5, 0, '[]', '[]')").run(user(2));
    expect(await reader.countUsers()).toBe(1);
    expect((await readAll(reader, 10)).flat().map((rows) => rows.userId)).toEqual([user(1)]);
    await reader.close();
    synapse.close();
  });

  it('never writes to the file', async () => {
    writeSynapseSqlite(path, { users: [user(1)], rules: [aRuleRow({ user_name: user(1) })] });
    const before = readFileSync(path);
    const reader = SqliteSynapseReader.open(path);
    await readAll(reader, 10);
    await reader.close();
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it.each([
    ['a file that does not exist', (p: string) => join(p, 'missing.db'), /cannot open the SQLite file/],
    [
      'a file that is not Synapse\u2019s',
      (p: string) => {
        writeSynapseSqlite(join(p, 'other.db'), { without: ['push_rules', 'pushers'] });
        return join(p, 'other.db');
      },
      /is not a Synapse database: no table push_rules, pushers/,
    ],
  ] as const)('refuses %s with a SourceError that says why', (_name, make, message) => {
    const file = make(dir);
    expect(() => SqliteSynapseReader.open(file)).toThrow(SourceError);
    expect(() => SqliteSynapseReader.open(file)).toThrow(message);
  });
});
