import type { MappedUser, ReportedSkip, SkipReason } from './map-user.js';

/**
 * What became of a user: written (`imported`), already exactly so in the
 * store (`unchanged`), left alone because they have data of their own
 * (`present`), lost their write to a concurrent one every time
 * (`conflict`), not imported at all (`skipped`), or only read (`dry-run`).
 */
export type UserStatus = 'imported' | 'unchanged' | 'present' | 'conflict' | 'skipped' | 'dry-run';

/** One line of the report file. */
export interface UserReport {
  readonly user: string;
  readonly status: UserStatus;
  /** `push_rules` rows imported (or, in a dry run, that would be). */
  readonly rules: number;
  readonly pushers: number;
  readonly skipped: readonly ReportedSkip[];
  readonly notes: MappedUser['notes'];
}

export interface ImportSummary {
  readonly users: Readonly<Record<UserStatus, number>>;
  readonly usersRead: number;
  /** Rules and pushers written (or, in a dry run, that would be). */
  readonly rules: number;
  readonly pushers: number;
  /** Items not imported, by reason: rows, and whole users. */
  readonly skipped: Readonly<Partial<Record<SkipReason, number>>>;
  readonly notes: Readonly<Record<string, number>>;
}

/** Counts a run's users as they are done; pure, so the summary is tested as a table. */
export class ImportTally {
  readonly #users: Record<UserStatus, number> = {
    imported: 0,
    unchanged: 0,
    present: 0,
    conflict: 0,
    skipped: 0,
    'dry-run': 0,
  };
  #rules = 0;
  #pushers = 0;
  readonly #skipped: Partial<Record<SkipReason, number>> = {};
  readonly #notes: Record<string, number> = {};

  /** Counts one user and returns its report line. */
  add(mapped: MappedUser, status: UserStatus): UserReport {
    this.#users[status] += 1;
    const written = status === 'imported' || status === 'dry-run';
    const rules = written ? mapped.rules : 0;
    const pushers = written ? mapped.pushers.length : 0;
    this.#rules += rules;
    this.#pushers += pushers;
    // Rows skipped count whatever became of the user: they are not in the store either way.
    for (const skip of mapped.skipped) this.#skipped[skip.reason] = (this.#skipped[skip.reason] ?? 0) + 1;
    for (const note of mapped.notes) this.#notes[note.kind] = (this.#notes[note.kind] ?? 0) + 1;
    return { user: mapped.userId, status, rules, pushers, skipped: mapped.skipped, notes: mapped.notes };
  }

  get usersDone(): number {
    return Object.values(this.#users).reduce((sum, count) => sum + count, 0);
  }

  summary(): ImportSummary {
    return {
      users: { ...this.#users },
      usersRead: this.usersDone,
      rules: this.#rules,
      pushers: this.#pushers,
      skipped: { ...this.#skipped },
      notes: { ...this.#notes },
    };
  }
}

/** Whether the run skipped anything an operator must look at (the exit status without `--allow-skips`). */
export function anythingSkipped(summary: ImportSummary): boolean {
  return Object.keys(summary.skipped).length > 0;
}

/** The run's context, for the summary's wording. */
export interface SummaryContext {
  readonly source: string;
  readonly dryRun: boolean;
  readonly elapsedMs: number;
  /** How change events went: published to this exchange, or not, and why. */
  readonly events:
    { readonly published: true; readonly exchange: string } | { readonly published: false; readonly why: string };
  readonly interrupted: boolean;
  readonly reportFile?: string | undefined;
}

const NUMBER = new Intl.NumberFormat('en-US');
const count = (n: number) => NUMBER.format(n);

/** The summary printed at the end of a run. */
export function formatSummary(summary: ImportSummary, context: SummaryContext): string {
  const { users } = summary;
  const verb = context.dryRun ? 'would be imported' : 'imported';
  const lines = [
    `Import from ${context.source} ${context.interrupted ? 'stopped by Ctrl-C after' : 'finished in'} ${(context.elapsedMs / 1000).toFixed(1)} s${context.dryRun ? ' (dry run: nothing written)' : ''}`,
    `users read: ${count(summary.usersRead)}`,
  ];
  const userLines: [number, string][] = [
    [context.dryRun ? users['dry-run'] : users.imported, verb],
    [users.unchanged, 'unchanged (already imported)'],
    [users.present, 'already present, left alone (--overwrite replaces them)'],
    [users.conflict, 'not written: changed by a worker meanwhile, every attempt (run again with --users)'],
    [users.skipped, 'skipped whole (see below)'],
  ];
  for (const [n, what] of userLines) if (n > 0 || what === verb) lines.push(`  ${count(n)} ${what}`);
  lines.push(`rules ${verb}: ${count(summary.rules)}; pushers ${verb}: ${count(summary.pushers)}`);
  const skipped = Object.entries(summary.skipped).sort(([a], [b]) => a.localeCompare(b));
  if (skipped.length === 0) lines.push('skipped: nothing');
  else {
    lines.push('skipped, by reason (docs/import-from-synapse.md#what-is-skipped-and-why):');
    for (const [reason, n] of skipped) lines.push(`  ${reason}: ${count(n)}`);
  }
  const notes = Object.entries(summary.notes).sort(([a], [b]) => a.localeCompare(b));
  if (notes.length > 0) lines.push(`notes: ${notes.map(([kind, n]) => `${kind} ${count(n)}`).join(', ')}`);
  if (!context.dryRun) {
    lines.push(
      context.events.published
        ? `change events: published to ${context.events.exchange}`
        : `change events: NOT published (${context.events.why}); running workers and fronts learn of the imported users only when they read them again`,
    );
  }
  if (context.reportFile !== undefined) lines.push(`per-user report: ${context.reportFile}`);
  if (context.interrupted)
    lines.push('run the same command again to resume: users already imported are left as they are');
  return lines.join('\n');
}
