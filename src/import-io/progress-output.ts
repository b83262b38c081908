import { formatBar, formatProgress, type ProgressState } from '../import/import-progress.js';

/** Where the run's progress is shown. */
export interface ProgressSink {
  update(state: ProgressState): void;
  /** Clears a bar, so that the summary starts on a line of its own. */
  done(): void;
}

/** What the output needs of a stream: stderr, or a test's double. */
export interface ProgressStream {
  readonly isTTY?: boolean;
  readonly columns?: number;
  write(text: string): unknown;
}

/**
 * A bar redrawn in place on a terminal (at most every `redrawMs`), plain
 * lines every `lineEveryMs` otherwise (a log file, a pipe, CI).
 */
export function progressOutput(
  stream: ProgressStream,
  { redrawMs = 200, lineEveryMs = 10_000, now = () => Date.now() } = {},
): ProgressSink {
  const tty = stream.isTTY === true;
  let last = Number.NEGATIVE_INFINITY;
  let drawn = false;
  return {
    update(state) {
      const at = now();
      const finished = state.total !== undefined && state.done >= state.total;
      if (at - last < (tty ? redrawMs : lineEveryMs) && !finished) return;
      last = at;
      if (tty) {
        const bar = formatBar(state, Math.max(10, Math.min(40, (stream.columns ?? 80) - 60)));
        stream.write(`\r\u001b[2K${bar} ${formatProgress(state)}`);
        drawn = true;
      } else {
        stream.write(`progress: ${formatProgress(state)}\n`);
      }
    },
    done() {
      if (drawn) stream.write('\n');
      drawn = false;
    },
  };
}
