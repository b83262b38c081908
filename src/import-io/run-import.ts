import { ImportTally, type ImportSummary, type UserStatus } from '../import/import-tally.js';
import { IMPORTED_DEFAULTS_REVISION, mapUser, type MappedUser } from '../import/map-user.js';
import type { PusherPolicy } from '../pushers/decide-pusher-set.js';
import type { ImportStore, UserImport, UserImportOutcome } from '../store/import-store.js';
import type { ChangeEvent, ChangeEventSink } from './change-event-publisher.js';
import type { ProgressSink } from './progress-output.js';
import type { ReportSink } from './report-writer.js';
import type { SynapseReader } from './synapse-reader.js';

export interface ImportRun {
  readonly reader: SynapseReader;
  /** Absent in a dry run: nothing is written. */
  readonly store?: ImportStore | undefined;
  /** Absent: no change events (`--no-events`, or a dry run). */
  readonly events?: ChangeEventSink | undefined;
  readonly report: ReportSink;
  readonly progress: ProgressSink;
  readonly policy: PusherPolicy;
  readonly batchSize: number;
  readonly users?: readonly string[] | undefined;
  readonly overwrite: boolean;
  /** Aborted (Ctrl-C): the run ends after the batch it is writing. */
  readonly stop: AbortSignal;
  readonly now?: () => number;
  /** Times a user whose write lost to a concurrent one is tried again before it is reported. */
  readonly conflictRetries?: number;
}

export interface ImportResult {
  readonly summary: ImportSummary;
  readonly interrupted: boolean;
  readonly elapsedMs: number;
}

const DEFAULT_CONFLICT_RETRIES = 3;

/**
 * Reads Synapse batch by batch, maps each user, writes the batch, announces
 * it, reports it. The next batch is read and mapped while one is written,
 * so at most two batches are held. A stop takes effect between batches:
 * every batch is written and announced whole, and a run started again
 * resumes (the users done are `unchanged`).
 */
export async function runImport(run: ImportRun): Promise<ImportResult> {
  const now = run.now ?? (() => performance.now());
  const started = now();
  const tally = new ImportTally();
  const total = await run.reader.countUsers(run.users);
  let interrupted = false;
  // Read through a function: the signal changes while a batch is written.
  const stopped = () => run.stop.aborted;
  run.progress.update({ done: 0, total, elapsedMs: 0 });
  const batches = run.reader.batches(run.batchSize, run.users);
  const nextMapped = async (): Promise<readonly MappedUser[] | undefined> => {
    const step = await batches.next();
    return step.done === true ? undefined : step.value.map((rows) => mapUser(rows, run.policy));
  };
  try {
    let pending = nextMapped();
    for (let mapped = await pending; mapped !== undefined; mapped = await pending) {
      if (stopped()) {
        interrupted = true;
        break;
      }
      const writing = writeBatch(run, mapped);
      // The write is on its way: the next batch is read and mapped meanwhile.
      pending = nextMapped();
      // Settled here if the write fails, so that it is not left unhandled.
      pending.catch(() => undefined);
      const statuses = await writing;
      for (const user of mapped) await run.report.write(tally.add(user, statuses.get(user.userId) ?? 'skipped'));
      run.progress.update({ done: tally.usersDone, total, elapsedMs: now() - started });
      if (stopped()) {
        interrupted = tally.usersDone < total;
        break;
      }
    }
  } finally {
    await batches.return(undefined);
  }
  run.progress.done();
  return { summary: tally.summary(), interrupted, elapsedMs: now() - started };
}

/** Writes the batch's users and announces them; each user's status. */
async function writeBatch(run: ImportRun, mapped: readonly MappedUser[]): Promise<ReadonlyMap<string, UserStatus>> {
  const statuses = new Map<string, UserStatus>();
  const imports: UserImport[] = [];
  for (const user of mapped) {
    if (user.ruleset === undefined) statuses.set(user.userId, 'skipped');
    else if (run.store === undefined) statuses.set(user.userId, 'dry-run');
    else
      imports.push({
        userId: user.userId,
        ruleset: user.ruleset,
        defaultsRevision: IMPORTED_DEFAULTS_REVISION,
        pushers: user.pushers,
      });
  }
  if (run.store === undefined || imports.length === 0) return statuses;
  const events: ChangeEvent[] = [];
  const written: string[] = [];
  // With events, the users written stay marked as an unfinished import
  // until their events are confirmed: a publish that fails ends the run
  // with the marks in place, and the next run imports and announces those
  // users again instead of finding them `unchanged`.
  const keepMarks = run.events !== undefined;
  let pending = imports;
  for (let attempt = 0; pending.length > 0; attempt += 1) {
    const outcomes = await run.store.importUsers(pending, { overwrite: run.overwrite, keepMarks });
    const lost = new Set<string>();
    for (const outcome of outcomes) {
      if (outcome.status === 'conflict' && attempt < (run.conflictRetries ?? DEFAULT_CONFLICT_RETRIES)) {
        lost.add(outcome.userId);
        continue;
      }
      statuses.set(outcome.userId, outcome.status);
      if (outcome.status === 'imported') written.push(outcome.userId);
      events.push(...eventsOf(outcome));
    }
    pending = pending.filter((user) => lost.has(user.userId));
  }
  if (run.events !== undefined) {
    await run.events.publish(events);
    await run.store.finishImports(written);
  }
  return statuses;
}

function eventsOf(outcome: UserImportOutcome): ChangeEvent[] {
  if (outcome.status !== 'imported') return [];
  const events: ChangeEvent[] = [];
  if (outcome.pushRulesVersion !== undefined)
    events.push({ user_id: outcome.userId, type: 'm.push_rules', version: outcome.pushRulesVersion });
  if (outcome.pushersVersion !== undefined)
    events.push({ user_id: outcome.userId, type: 'm.pushers', version: outcome.pushersVersion });
  return events;
}
