import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { signalShutdown } from '../../src/lifecycle/signal-shutdown.js';

function setUp(close: () => Promise<void>, timeoutMs = 10_000) {
  const exits: number[] = [];
  const abort = new AbortController();
  const stop = signalShutdown({
    close,
    timeoutMs,
    inFlight: () => 0,
    log: pino({ level: 'silent' }),
    exit: (code) => exits.push(code),
    abort,
  });
  return { stop, exits, abort };
}

describe('shutdown on signals', () => {
  it('closes, then exits 0, and tells start-up waits to stop', async () => {
    let closed = false;
    const { stop, exits, abort } = setUp(async () => {
      await sleep(10);
      closed = true;
    });
    stop('SIGTERM');
    expect(abort.signal.aborted).toBe(true);
    expect(exits).toEqual([]);
    await sleep(50);
    expect(closed).toBe(true);
    expect(exits).toEqual([0]);
  });

  it('a second signal exits 1 at once', () => {
    const { stop, exits } = setUp(async () => new Promise(() => undefined));
    stop('SIGTERM');
    stop('SIGINT');
    expect(exits).toEqual([1]);
  });

  it('exits 1 when closing outlasts the timeout', async () => {
    const { stop, exits } = setUp(async () => new Promise(() => undefined), 30);
    stop('SIGTERM');
    await sleep(100);
    expect(exits).toEqual([1]);
  });

  it('exits 1 when closing fails', async () => {
    const { stop, exits } = setUp(async () => Promise.reject(new Error('stuck channel')));
    stop('SIGTERM');
    await sleep(10);
    expect(exits).toEqual([1]);
  });
});
