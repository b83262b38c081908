import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { Command } from '../../src/service/command.js';
import type { RequestReport } from '../../src/consumer/worker-observer.js';
import { CONTRACT_KINDS } from '../support/expect-result.js';
import { startHarness, type Harness } from './support/worker-harness.js';

/**
 * Failures the worker did not foresee: each request still gets exactly one
 * reply, the failure is logged at error with its cause, and the worker goes
 * on serving. Before, a throw outside the service's `try` rejected the
 * message handler, and the unhandled rejection ended the process.
 */
const BOOM_USER = '@boom:example.org';
const REPORT_BOOM_USER = '@report-boom:example.org';
const USER = '@fine:example.org';

const logged: { level: number; msg: string; err?: { message: string } }[] = [];
const served: string[] = [];
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);
let reportBoom = false;
let h: Harness;

beforeAll(async () => {
  process.on('unhandledRejection', onUnhandled);
  h = await startHarness(
    {},
    {
      logger: pino(
        { level: 'error' },
        { write: (line: string) => logged.push(JSON.parse(line) as (typeof logged)[number]) },
      ),
      beforeServe: (command: Command) => {
        served.push(command.userId);
        if (command.userId === BOOM_USER) throw new Error('hook exploded');
        reportBoom = command.userId === REPORT_BOOM_USER;
      },
      observer: {
        requestSettled: (_report: RequestReport) => {
          if (reportBoom) throw new Error('observer exploded');
        },
        reconnected: () => undefined,
      },
    },
  );
});
afterEach(() => {
  logged.length = 0;
  served.length = 0;
});
afterAll(async () => {
  await h.close();
  process.off('unhandledRejection', onUnhandled);
});

async function expectStillServing(): Promise<void> {
  expect(await h.call('get_pushers', USER)).toEqual({ ok: true, body: { pushers: [] } });
}

describe('a worker that fails unexpectedly while serving', () => {
  it('answers a throw before the service with an internal error, logs it, and serves the next request', async () => {
    const reply = await h.call('get_pushers', BOOM_USER);
    expect(reply).toEqual({
      ok: false,
      error: { kind: 'Internal', ...CONTRACT_KINDS.Internal, error: 'Internal error.' },
    });
    expect(logged).toContainEqual(
      expect.objectContaining({
        level: 50,
        msg: 'request failed unexpectedly',
        err: expect.objectContaining({ message: 'hook exploded' }) as unknown,
      }),
    );
    await expectStillServing();
    // Answered and acknowledged once: the broker did not hand it out again.
    expect(served.filter((user) => user === BOOM_USER)).toEqual([BOOM_USER]);
    expect(unhandled).toEqual([]);
  });

  it('logs a throw after the reply went out, without a second reply, and serves the next request', async () => {
    expect(await h.call('get_pushers', REPORT_BOOM_USER)).toEqual({ ok: true, body: { pushers: [] } });
    await expect.poll(() => logged.map((l) => l.err?.message)).toContain('observer exploded');
    expect(logged.find((l) => l.err?.message === 'observer exploded')).toMatchObject({
      level: 50,
      msg: 'request failed unexpectedly',
    });
    reportBoom = false;
    await expectStillServing();
    expect(served.filter((user) => user === REPORT_BOOM_USER)).toEqual([REPORT_BOOM_USER]);
    expect(unhandled).toEqual([]);
  });
});
