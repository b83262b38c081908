import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { exitOnFatalErrors } from '../../src/lifecycle/fatal-errors.js';

function setUp() {
  const listeners = new Map<string, (error: unknown) => void>();
  const lines: Record<string, unknown>[] = [];
  const exits: number[] = [];
  const log = pino(
    { level: 'info' },
    { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  exitOnFatalErrors({
    events: {
      on: (event, listener) => {
        listeners.set(event, listener);
      },
    },
    log,
    exit: (code) => exits.push(code),
  });
  return { listeners, lines, exits };
}

describe('exit on errors nothing handled', () => {
  it('listens for uncaught exceptions and unhandled rejections', () => {
    expect([...setUp().listeners.keys()].sort()).toEqual(['uncaughtException', 'unhandledRejection']);
  });

  it.each([
    ['uncaughtException', new TypeError('boom'), { type: 'TypeError', message: 'boom' }],
    [
      'unhandledRejection',
      new RangeError('Maximum call stack size exceeded'),
      { type: 'RangeError', message: 'Maximum call stack size exceeded' },
    ],
    ['unhandledRejection', 'a bare string', undefined],
  ])('%s of %s: one JSON line at fatal with the error, then exit 1', (event, error, serialized) => {
    const { listeners, lines, exits } = setUp();
    listeners.get(event)?.(error);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 60,
        msg: 'unexpected error: exiting',
        event,
        err:
          serialized === undefined
            ? error
            : (expect.objectContaining({
                ...serialized,
                stack: expect.stringContaining(serialized.message) as unknown,
              }) as unknown),
      }),
    ]);
    expect(exits).toEqual([1]);
  });

  it('exits 1 even when logging fails', () => {
    const exits: number[] = [];
    let listener: ((error: unknown) => void) | undefined;
    const log = pino(
      { level: 'info' },
      {
        write: () => {
          throw new Error('disk full');
        },
      },
    );
    exitOnFatalErrors({
      events: {
        on: (_event, l) => {
          listener = l;
        },
      },
      log,
      exit: (code) => exits.push(code),
    });
    expect(() => listener?.(new Error('boom'))).toThrow('disk full');
    expect(exits).toEqual([1]);
  });
});
