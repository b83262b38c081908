import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { aPusherRow, aRuleRow } from '../support/synapse-rows.js';
import { writeSynapseSqlite } from '../support/synapse-sqlite.js';

/*
 * The command as an operator runs it: a process stopped with Ctrl-C
 * (SIGINT) after its first batch, then run again to resume.
 */
const USERS = 400;
const user = (n: number) => `@u${String(n).padStart(4, '0')}:example.org`;

let dir: string;
let database: string;
const mongo = new MongoClient(inject('mongoUrl'), { serverSelectionTimeoutMS: 5000 });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'import-interrupt-'));
  database = `test_import_${process.pid}_${Date.now()}`;
  const ids = Array.from({ length: USERS }, (_, n) => user(n));
  writeSynapseSqlite(join(dir, 'homeserver.db'), {
    users: ids,
    rules: ids.map((id) => aRuleRow({ user_name: id })),
    pushers: ids.map((id) => aPusherRow({ user_name: id })),
  });
  await mongo.connect();
});

afterAll(async () => {
  await mongo.db(database).dropDatabase();
  await mongo.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs the command; `interruptOn` sends SIGINT when stderr first shows it. */
async function command(interruptOn?: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'src/import-synapse-main.ts',
      '--from',
      `sqlite:${join(dir, 'homeserver.db')}`,
      '--batch-size',
      '1',
      '--no-events',
    ],
    {
      env: { ...process.env, MONGODB_URL: inject('mongoUrl'), MONGODB_DATABASE: database },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  let stderr = '';
  let sent = false;
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    if (interruptOn !== undefined && !sent && stderr.includes(interruptOn)) {
      sent = true;
      child.kill('SIGINT');
    }
  });
  const status = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { status, stdout, stderr };
}

describe('npm run import:synapse, stopped with Ctrl-C', () => {
  it('stops after the batch it is writing (exit 130); the same command again resumes and finishes', async () => {
    // The first progress line comes before the first batch: the signal arrives while users remain.
    const stopped = await command('progress: 0/');
    expect(stopped.status, stopped.stderr).toBe(130);
    expect(stopped.stderr).toContain('stopping after the current batch');
    expect(stopped.stdout).toContain('stopped by Ctrl-C');
    const done = Number(/users read: (\d+)/.exec(stopped.stdout)?.[1]);
    expect(done).toBeGreaterThan(0);
    expect(done).toBeLessThan(USERS);
    expect(
      await mongo
        .db(database)
        .collection('account_data')
        .countDocuments({ import_pending: { $exists: true } }),
    ).toBe(0);

    const resumed = await command();
    expect(resumed.status, resumed.stderr).toBe(0);
    expect(resumed.stdout).toContain(`users read: ${USERS}`);
    expect(resumed.stdout).toContain(`${USERS - done} imported`);
    expect(resumed.stdout).toContain(`${done} unchanged (already imported)`);
    const lists = await mongo
      .db(database)
      .collection<{ pushers?: unknown[] }>('account_data')
      .find({}, { projection: { pushers: 1 } })
      .toArray();
    expect(lists.reduce((n, doc) => n + (doc.pushers?.length ?? 0), 0)).toBe(USERS);
  });
});
