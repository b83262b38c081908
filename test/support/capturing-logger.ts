import { Writable } from 'node:stream';
import { pino, type Level } from 'pino';

/**
 * A real pino logger whose lines are kept in `lines`, to check what a
 * worker logs, or to show it when a test fails. With `keep`, only the last
 * that many lines are kept.
 */
export function capturingLogger(lines: string[], level: Level = 'debug', keep = Infinity) {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(
        ...chunk
          .toString('utf8')
          .split('\n')
          .filter((line) => line !== ''),
      );
      if (lines.length > keep) lines.splice(0, lines.length - keep);
      done();
    },
  });
  return pino({ level }, sink);
}
