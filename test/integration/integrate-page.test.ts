import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { pythonMissing, pythonVenv } from './support/python-venv.js';
import { deleteTopology, uniqueNames, type Names } from './support/worker-harness.js';
import {
  startWorkerProcess,
  stopWorkerProcess,
  workerEnvironment,
  type WorkerProcess,
} from './support/worker-processes.js';

/**
 * docs/integrate.md shows a homeserver developer the wire with pika, without this project's
 * clients. Its code is run here as the page shows it, in the project's virtualenv
 * (scripts/python-venv.sh), against a real worker process on this run's broker and MongoDB (its
 * own queues and database, the broker user trusted), and must print what the page says it
 * prints. Skipped only where Python 3 or its venv module is missing.
 */
const PAGE = readFileSync(new URL('../../docs/integrate.md', import.meta.url), 'utf8');

/** The page's ```python blocks, in order. */
function pythonBlocks(page: string): string[] {
  return [...page.matchAll(/^```python\n([\s\S]*?)^```$/gm)].map((match) => match[1] ?? '');
}

/** What the page says the walk-through prints: the code spans of "It prints `…` … and `…`". */
function statedOutput(page: string): string[] {
  const sentence = /^It prints (.*?)\n\n/ms.exec(page)?.[1] ?? '';
  return [...sentence.matchAll(/`([^`]+)`/g)].map((match) => match[1] ?? '');
}

const missing = pythonMissing();
if (missing !== undefined) console.warn(`[docs/integrate.md] skipped: ${missing}`);

describe.skipIf(missing !== undefined)("docs/integrate.md's pika walk-through", () => {
  let names: Names;
  let worker: WorkerProcess;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    names = uniqueNames();
    // The walk-through sends notify as the connection's user: the workers must trust it.
    env = workerEnvironment(names, { TRUSTED_PUBLISHERS: decodeURIComponent(new URL(names.amqp.url).username) });
    worker = await startWorkerProcess(env);
  });

  afterAll(async () => {
    await stopWorkerProcess(worker);
    await deleteTopology(names);
    const mongo = new MongoClient(inject('mongoUrl'));
    await mongo.db(names.database).dropDatabase();
    await mongo.close();
  });

  it('is one block of Python, and the page says what it prints', () => {
    expect(pythonBlocks(PAGE)).toHaveLength(1);
    expect(statedOutput(PAGE)).toEqual(['{"@alice:example.org": ["notify"]}', '{"recipients": 0, "devices": 0}']);
  });

  it('runs as the page shows it against a real worker, printing what the page says', { timeout: 300_000 }, async () => {
    const [snippet = ''] = pythonBlocks(PAGE);
    const venv = await pythonVenv();
    // The snippet reads the workers' own variables: the queues and the broker of this test's worker.
    const result = spawnSync(`${venv}/bin/python`, ['-'], { input: snippet, env, encoding: 'utf8', timeout: 60_000 });
    expect(result.status, `python exited with ${String(result.status)}: ${result.stderr}`).toBe(0);
    expect(result.stdout.trim().split('\n')).toEqual(statedOutput(PAGE));
  });
});
