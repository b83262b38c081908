import { describe, expect, it } from 'vitest';
import { progressOutput } from '../../src/import-io/progress-output.js';

function aStream(isTTY: boolean) {
  const writes: string[] = [];
  return { writes, stream: { isTTY, columns: 100, write: (text: string) => writes.push(text) } };
}

describe('progressOutput', () => {
  it('redraws a bar in place on a terminal, at most every redraw interval, and ends its line', () => {
    let now = 0;
    const { writes, stream } = aStream(true);
    const progress = progressOutput(stream, { redrawMs: 200, now: () => now });
    progress.update({ done: 0, total: 10, elapsedMs: 0 });
    now = 100;
    progress.update({ done: 1, total: 10, elapsedMs: 100 });
    now = 300;
    progress.update({ done: 5, total: 10, elapsedMs: 300 });
    progress.done();
    expect(writes).toHaveLength(3);
    expect(writes[1]?.startsWith('\r\u001b[2K[')).toBe(true);
    expect(writes[1]).toMatch(/\[#+\.+\] 5\/10 users \(50%\)/);
    expect(writes[2]).toBe('\n');
  });

  it('writes plain lines otherwise, every line interval, and always the last one', () => {
    let now = 0;
    const { writes, stream } = aStream(false);
    const progress = progressOutput(stream, { lineEveryMs: 10_000, now: () => now });
    progress.update({ done: 0, total: 10, elapsedMs: 0 });
    now = 5000;
    progress.update({ done: 5, total: 10, elapsedMs: 5000 });
    now = 6000;
    progress.update({ done: 10, total: 10, elapsedMs: 6000 });
    progress.done();
    expect(writes).toEqual([
      'progress: 0/10 users (0%), 0 users/s\n',
      'progress: 10/10 users (100%), 2 users/s, ETA 0s\n',
    ]);
  });
});
