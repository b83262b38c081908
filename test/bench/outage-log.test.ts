import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkOutage } from '../../bench/support/outage-check.js';
import { keepIfFailed } from '../../bench/support/outage-log.js';

/** One device, notifications 1–5 (the outage from 3): `delivered` what it got, by number. */
const aCheck = (...delivered: number[]) =>
  checkOutage({
    published: new Map([['k', [1, 2, 3, 4, 5].map((n) => ({ n, at: n * 100, takenInAt: n * 100 + 10 }))]]),
    delivered: new Map([
      ['k', delivered.map((n, i) => ({ eventId: `$${String(n)}`, at: n < 3 ? n * 100 + 20 : 1000 + i }))],
    ]),
    outageStart: 250,
    recoveredAt: 900,
    maxPending: 2,
    eventNumber: (id) => Number(id.slice(1)),
  });

function aLogFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'mpw-outage-log-')), 'worker.log');
  writeFileSync(file, 'a line\n');
  return file;
}

describe("the outage scenario's own worker log", () => {
  it.each([
    { when: 'the per-device check passed', check: aCheck(1, 2, 4, 5), kept: false },
    { when: 'a device got one past its cap', check: aCheck(1, 2, 3, 4, 5), kept: true },
    { when: 'the scenario did not finish', check: undefined, kept: true },
  ])('is kept (and its path logged) only when it may explain something: $when → kept $kept', ({ check, kept }) => {
    const file = aLogFile();
    const logged: string[] = [];
    keepIfFailed(file, check, (line) => logged.push(line));
    expect(existsSync(file)).toBe(kept);
    expect(logged).toEqual(kept ? [`delivery/outage: the worker's log is kept at ${file}`] : []);
  });
});
