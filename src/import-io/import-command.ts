import { MongoClient } from 'mongodb';
import { parseBrokerAddresses } from '../config/broker-urls.js';
import { ConfigError, loadConfig } from '../config/load-config.js';
import { IMPORT_USAGE, parseImportArgs, type ImportOptions } from '../import/import-options.js';
import { anythingSkipped, formatSummary, type SummaryContext } from '../import/import-tally.js';
import { mongoClientOptions } from '../store/mongo-client-options.js';
import { MongoImportStore } from '../store/mongo-import-store.js';
import { MongoPushStore } from '../store/mongo-push-store.js';
import { AmqpChangeEventPublisher, type ChangeEventSink } from './change-event-publisher.js';
import { PostgresSynapseReader } from './postgres-synapse-reader.js';
import { progressOutput, type ProgressStream } from './progress-output.js';
import { JsonLinesReport, NO_REPORT, type ReportSink } from './report-writer.js';
import { runImport } from './run-import.js';
import { SqliteSynapseReader } from './sqlite-synapse-reader.js';
import type { SynapseReader } from './synapse-reader.js';

/** Exit statuses of `npm run import:synapse` (its `--help` lists them). */
export const EXIT = { done: 0, skipped: 1, usage: 2, failed: 3, interrupted: 130 } as const;

/** What the command talks to: the process's streams and signals, or a test's. */
export interface CommandIo {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: ProgressStream;
  /** Aborted on the first Ctrl-C. */
  readonly stop: AbortSignal;
}

/**
 * `npm run import:synapse`: the arguments and the worker's configuration
 * (MONGODB_URL, AMQP_URL, …) read, the source opened read-only, the run,
 * the summary; the exit status. Every failure is one line on stderr, never
 * a stack trace, and never a password.
 */
export async function importCommand(argv: readonly string[], env: NodeJS.ProcessEnv, io: CommandIo): Promise<number> {
  const fail = (status: number, message: string) => {
    io.stderr.write(`import:synapse: ${message}\n`);
    return status;
  };
  const parsed = parseImportArgs(argv);
  if (!parsed.ok) return fail(EXIT.usage, parsed.message);
  if ('help' in parsed) {
    io.stdout.write(`${IMPORT_USAGE}\n`);
    return EXIT.done;
  }
  const { options } = parsed;
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return fail(EXIT.usage, error.message);
    throw error;
  }

  const resources: { close(): Promise<unknown> }[] = [];
  let running = false;
  try {
    const reader = await openReader(options);
    resources.push(reader);
    let store: MongoImportStore | undefined;
    let events: ChangeEventSink | undefined;
    let eventsContext: SummaryContext['events'] = { published: false, why: 'dry run' };
    if (!options.dryRun) {
      const mongo = new MongoClient(config.mongodb.url, mongoClientOptions(config.mongodb));
      resources.push(mongo);
      const db = mongo.db(config.mongodb.database);
      try {
        await db.command({ ping: 1 });
        // The workers create them at start-up; an import may come first.
        await new MongoPushStore(db, config.mongodb).ensureIndexes();
      } catch (error) {
        throw new Error(`cannot reach the store (mongodb.url, MONGODB_URL): ${messageOf(error)}`, { cause: error });
      }
      store = new MongoImportStore(db, config.mongodb);
      if (options.noEvents) {
        eventsContext = { published: false, why: '--no-events' };
      } else {
        try {
          events = await AmqpChangeEventPublisher.connect(
            parseBrokerAddresses(config.amqp.url),
            config.amqp.eventsExchange,
            config.amqp.connectTimeoutMs,
          );
        } catch (error) {
          throw new Error(
            `${messageOf(error)}; set AMQP_URL to the workers' broker, or run with --no-events (see docs/import-from-synapse.md)`,
            { cause: error },
          );
        }
        resources.push(events);
        eventsContext = { published: true, exchange: config.amqp.eventsExchange };
      }
    }
    let report: ReportSink = NO_REPORT;
    if (options.reportFile !== undefined) {
      try {
        report = await JsonLinesReport.open(options.reportFile);
      } catch (error) {
        throw new Error(`cannot write the report file ${options.reportFile}: ${messageOf(error)}`, { cause: error });
      }
      resources.push(report);
    }
    running = true;
    const result = await runImport({
      reader,
      store,
      events,
      report,
      progress: progressOutput(io.stderr),
      policy: { allowInsecureGateways: config.pushers.allowInsecureGateways },
      batchSize: options.batchSize,
      users: options.users,
      overwrite: options.overwrite,
      stop: io.stop,
    });
    await report.close();
    io.stdout.write(
      `${formatSummary(result.summary, {
        source: options.source.display,
        dryRun: options.dryRun,
        elapsedMs: result.elapsedMs,
        events: eventsContext,
        interrupted: result.interrupted,
        reportFile: options.reportFile,
      })}\n`,
    );
    if (result.interrupted) return EXIT.interrupted;
    if (result.summary.users.conflict > 0) return EXIT.skipped;
    return anythingSkipped(result.summary) && !options.allowSkips ? EXIT.skipped : EXIT.done;
  } catch (error) {
    // A source, store or broker failure: what failed, never a stack.
    return fail(
      EXIT.failed,
      `${messageOf(error)}${running ? '\nusers written before the failure stay imported; run the command again to resume' : ''}`,
    );
  } finally {
    for (const resource of resources.reverse()) await resource.close().catch(() => undefined);
  }
}

async function openReader(options: ImportOptions): Promise<SynapseReader> {
  const { source } = options;
  return source.kind === 'sqlite'
    ? SqliteSynapseReader.open(source.path)
    : PostgresSynapseReader.open(source.url, source.display);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
