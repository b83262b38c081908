import { afterAll, beforeAll, describe, it } from 'vitest';
import { loadCases } from '../support/conformance-case-files.js';
import { CLIENT_ADAPTERS } from './support/client-adapters.js';
import { runCase } from './support/conformance-run.js';
import { startConformanceWorkers, type ConformanceWorkers } from './support/conformance-workers.js';
import { WireAdapterProcess, type AdapterCommand } from './support/wire-adapter-process.js';

/**
 * One conformance run for every client (issue 41): every case of
 * contract/cases/ through each client's wire adapter, one long-lived
 * process per client fed every case, against a real worker. A case a
 * client fails is a bug in that client or in the contract: it fails here,
 * never skipped. A client is skipped, saying why, only where it cannot run
 * at all (no Python 3.10+ with venv; no clients/rust or no cargo).
 */
const CASES = loadCases();
/** An answer comes within the clients' own 10 s deadline; more only on a machine far too busy. */
const ANSWER_TIMEOUT_MS = 30_000;

/** Not passed on to an adapter: it runs as the run says, on the queues the workers consume. */
const UNSET_FOR_ADAPTERS = new Set([
  'PUBLISHER_USER_ID',
  'RPC_QUEUE',
  'RPC_READ_QUEUE',
  'EVALUATE_QUEUE',
  'DELIVERY_QUEUE',
]);

let workers: ConformanceWorkers | undefined;

beforeAll(async () => {
  workers = await startConformanceWorkers();
});
afterAll(async () => {
  await workers?.close();
});

const running = (): ConformanceWorkers => {
  if (workers === undefined) throw new Error('the workers did not start');
  return workers;
};

for (const adapter of CLIENT_ADAPTERS) {
  const missing = adapter.missing();
  if (missing !== undefined) console.warn(`[conformance] the ${adapter.client} client is skipped: ${missing}`);

  describe.skipIf(missing !== undefined).concurrent(`the ${adapter.client} client's wire adapter`, () => {
    let command: Omit<AdapterCommand, 'env'> | undefined;
    const started = new Map<'trusted' | 'none', WireAdapterProcess>();

    /** The adapter as a trusted publisher, or without one; each started once, on first use. */
    const adapterAs = (publisher: 'trusted' | 'none'): WireAdapterProcess => {
      const existing = started.get(publisher);
      if (existing !== undefined) return existing;
      if (command === undefined) throw new Error(`the ${adapter.client} adapter was not prepared`);
      const { amqpUrl, publisher: user } = running();
      // An adapter that also reads the workers' queue variables stays on the defaults the workers run on.
      const env: NodeJS.ProcessEnv = Object.fromEntries(
        Object.entries(process.env).filter(([name]) => !UNSET_FOR_ADAPTERS.has(name)),
      );
      env['AMQP_URL'] = amqpUrl;
      if (publisher === 'trusted') env['PUBLISHER_USER_ID'] = user;
      const process_ = WireAdapterProcess.start({ ...command, env });
      started.set(publisher, process_);
      return process_;
    };

    beforeAll(async () => {
      command = await adapter.prepare();
    }, adapter.prepareTimeoutMs);

    afterAll(async () => {
      const exits = await Promise.all(
        [...started.entries()].map(async ([publisher, process_]) => ({
          publisher,
          code: await process_.close(),
          stderr: process_.stderr(),
        })),
      );
      const bad = exits.filter(({ code }) => code !== 0);
      if (bad.length > 0)
        throw new Error(
          `the ${adapter.client} adapter did not exit cleanly once its input ended: ${JSON.stringify(bad)}`,
        );
    });

    it.for(CASES)('$name', async (named, { expect }) => {
      const failures = await runCase(named, {
        workers: running(),
        adapter: adapterAs,
        timeoutMs: ANSWER_TIMEOUT_MS,
      });
      expect(failures, `${adapter.client}: ${named.name} (contract/cases/${named.name}.json)`).toEqual([]);
    });
  });
}
