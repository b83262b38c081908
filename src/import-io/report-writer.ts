import { createWriteStream, type WriteStream } from 'node:fs';
import { once } from 'node:events';
import type { UserReport } from '../import/import-tally.js';

/** Where per-user report lines go. */
export interface ReportSink {
  write(report: UserReport): Promise<void>;
  close(): Promise<void>;
}

/** The per-user report as JSON lines in a file, written as users are done (one line each). */
export class JsonLinesReport implements ReportSink {
  readonly #stream: WriteStream;
  #failure: Error | undefined;

  private constructor(stream: WriteStream) {
    this.#stream = stream;
    stream.on('error', (error) => {
      this.#failure = error;
    });
  }

  /** Creates (or empties) the file; throws when it cannot be opened. */
  static async open(path: string): Promise<JsonLinesReport> {
    const stream = createWriteStream(path, { flags: 'w' });
    await Promise.race([
      once(stream, 'open'),
      once(stream, 'error').then(([error]) => {
        throw error as Error;
      }),
    ]);
    return new JsonLinesReport(stream);
  }

  async write(report: UserReport): Promise<void> {
    if (this.#failure !== undefined) throw this.#failure;
    // Waits for the file when its buffer is full: a report never holds the whole run in memory.
    if (!this.#stream.write(`${JSON.stringify(report)}\n`)) await once(this.#stream, 'drain');
  }

  async close(): Promise<void> {
    if (this.#stream.closed) return;
    await new Promise<void>((resolve) => this.#stream.end(resolve));
    if (this.#failure !== undefined) throw this.#failure;
  }
}

/** No report file. */
export const NO_REPORT: ReportSink = {
  write: async () => Promise.resolve(),
  close: async () => Promise.resolve(),
};
