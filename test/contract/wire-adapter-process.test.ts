import { afterEach, describe, expect, it } from 'vitest';
import { WireAdapterProcess } from '../integration/support/wire-adapter-process.js';

/**
 * How the conformance runner talks to a wire adapter
 * (test/integration/support/wire-adapter-process.ts), against small
 * adapters written here: answers matched by id whatever their order, and
 * every way an adapter can fail to answer reported as a failure.
 */

/** An adapter in a few lines of JavaScript: `answer(line)` returns the lines to write for each line read. */
function adapter(answer: string): WireAdapterProcess {
  const script = `
    const lines = require('node:readline').createInterface({ input: process.stdin });
    const seen = [];
    const answer = ${answer};
    lines.on('line', (line) => { for (const out of answer(JSON.parse(line), seen)) process.stdout.write(out + '\\n'); });
  `;
  return WireAdapterProcess.start({ command: process.execPath, args: ['-e', script], cwd: process.cwd(), env: {} });
}

let started: WireAdapterProcess | undefined;
afterEach(async () => {
  await started?.close(2_000);
  started = undefined;
});

describe('a wire adapter process', () => {
  it('matches answers to requests by id, in whatever order they come', async () => {
    // Holds the first request and answers both once the second comes, the second first.
    started = adapter(`(line, seen) => {
      seen.push(line);
      if (seen.length < 2) return [];
      return seen.reverse().map(({ id, request }) => JSON.stringify({ id, reply: { ok: true, body: request.op } }));
    }`);
    const [first, second] = await Promise.all([
      started.send({ op: 'first' }, 10_000),
      started.send({ op: 'second' }, 10_000),
    ]);
    expect(first).toEqual({ reply: { ok: true, body: 'first' } });
    expect(second).toEqual({ reply: { ok: true, body: 'second' } });
    expect(await started.close()).toBe(0);
  });

  it('reports an adapter_error as a failure, with its line', async () => {
    started = adapter(`({ id }) => [JSON.stringify({ id, adapter_error: 'no typed method' })]`);
    const answer = await started.send({ op: 'drop_database' }, 10_000);
    expect(answer).toEqual({ failure: expect.stringContaining('no typed method') as unknown });
  });

  it('reports a request no line answers in time, with what the adapter wrote on stderr', async () => {
    started = adapter(`() => { process.stderr.write('thinking\\n'); return []; }`);
    const answer = await started.send({ op: 'get_pushers' }, 300);
    expect(answer).toEqual({ failure: expect.stringMatching(/^no answer within 300 ms; .*thinking/s) as unknown });
  });

  it('reports an adapter that exits before answering', async () => {
    started = adapter(`() => process.exit(3)`);
    const answer = await started.send({ op: 'get_pushers' }, 10_000);
    expect(answer).toEqual({ failure: expect.stringContaining('the adapter exited (3) before answering') as unknown });
    expect(await started.send({ op: 'get_pushers' }, 10_000)).toEqual({
      failure: expect.stringContaining('the adapter exited (3)') as unknown,
    });
  });
});
