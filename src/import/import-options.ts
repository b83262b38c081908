import { parseImportSource, type ImportSource } from './import-source.js';

/** The command line of `npm run import:synapse` (docs/import-from-synapse.md#running-the-import). */
export interface ImportOptions {
  readonly source: ImportSource;
  /** Read and report, write nothing. */
  readonly dryRun: boolean;
  /** Replace what users already have in the store. */
  readonly overwrite: boolean;
  /** Only these users (`--users a,b`), in this order; all users with push data otherwise. */
  readonly users?: readonly string[];
  /** Exit 0 even when rows or users were skipped. */
  readonly allowSkips: boolean;
  /** Where the per-user report (JSON lines) goes. */
  readonly reportFile?: string;
  readonly batchSize: number;
  /** Publish no change events (no broker at hand). */
  readonly noEvents: boolean;
}

export type ParsedArgs =
  | { readonly ok: true; readonly options: ImportOptions }
  | { readonly ok: true; readonly help: true }
  | { readonly ok: false; readonly message: string };

export const DEFAULT_BATCH_SIZE = 500;
/** A batch's users go into one query's parameter list (SQLite allows 32,766). */
const MAX_BATCH_SIZE = 10_000;

export const IMPORT_USAGE = `Usage: npm run import:synapse -- --from <postgresql://…|sqlite:PATH> [options]

Reads Synapse's push rules and pushers (read-only) and writes them into the
store the workers use (MONGODB_URL, or the configuration file's mongodb.*).

Options:
  --from SOURCE      Synapse's database: postgresql://USER[:PASSWORD]@HOST[:PORT]/DB or sqlite:PATH
  --dry-run          read, map and report; write nothing, publish nothing
  --overwrite        replace what users already have in the store (default: leave them alone)
  --users A,B        only these users (full user IDs, comma-separated)
  --allow-skips      exit 0 even when rows or users were skipped
  --report FILE      write one JSON line per user to FILE
  --batch-size N     users per batch (default ${DEFAULT_BATCH_SIZE})
  --no-events        publish no change events (no broker at hand; see the docs)
  --help             this text

Exit status: 0 done; 1 something was skipped (unless --allow-skips) or a
write lost to a concurrent one; 2 bad arguments or configuration; 3 the
source or the store failed; 130 stopped by Ctrl-C (a re-run resumes).`;

/** The command line read into options; a message naming what is wrong otherwise. */
export function parseImportArgs(argv: readonly string[]): ParsedArgs {
  let from: string | undefined;
  let users: string[] | undefined;
  let reportFile: string | undefined;
  let batchSize = DEFAULT_BATCH_SIZE;
  const flags = { dryRun: false, overwrite: false, allowSkips: false, noEvents: false };
  for (let index = 0; index < argv.length; index += 1) {
    const arg = argv[index] as string;
    const [name, inline] = arg.startsWith('--') && arg.includes('=') ? splitOnce(arg) : [arg, undefined];
    const value = (): string | undefined => {
      if (inline !== undefined) return inline;
      const next = argv[index + 1];
      if (next === undefined || next.startsWith('--')) return undefined;
      index += 1;
      return next;
    };
    switch (name) {
      case '--help':
      case '-h':
        return { ok: true, help: true };
      case '--dry-run':
      case '--overwrite':
      case '--allow-skips':
      case '--no-events': {
        if (inline !== undefined) return { ok: false, message: `${name} takes no value` };
        flags[FLAG_NAMES[name]] = true;
        break;
      }
      case '--from': {
        from = value();
        if (from === undefined) return { ok: false, message: '--from needs a value' };
        break;
      }
      case '--report': {
        reportFile = value();
        if (reportFile === undefined || reportFile === '') return { ok: false, message: '--report needs a file name' };
        break;
      }
      case '--users': {
        const list = value();
        if (list === undefined) return { ok: false, message: '--users needs a comma-separated list of user IDs' };
        const named = list
          .split(',')
          .map((user) => user.trim())
          .filter((user) => user !== '');
        if (named.length === 0) return { ok: false, message: '--users needs at least one user ID' };
        const bad = named.find((user) => !user.startsWith('@') || !user.includes(':'));
        if (bad !== undefined)
          return { ok: false, message: `--users: ${JSON.stringify(bad)} is not a user ID (@localpart:server)` };
        users = [...new Set([...(users ?? []), ...named])];
        break;
      }
      case '--batch-size': {
        const text = value();
        const size = text !== undefined && /^\d+$/.test(text) ? Number(text) : Number.NaN;
        if (!Number.isSafeInteger(size) || size < 1 || size > MAX_BATCH_SIZE)
          return { ok: false, message: `--batch-size takes a whole number from 1 to ${MAX_BATCH_SIZE}` };
        batchSize = size;
        break;
      }
      default:
        return { ok: false, message: `unknown argument ${JSON.stringify(name)} (--help lists the options)` };
    }
  }
  if (from === undefined) return { ok: false, message: '--from is required (--help lists the options)' };
  const parsed = parseImportSource(from);
  if (!parsed.ok) return parsed;
  return {
    ok: true,
    options: {
      source: parsed.source,
      ...flags,
      ...(users === undefined ? {} : { users }),
      ...(reportFile === undefined ? {} : { reportFile }),
      batchSize,
    },
  };
}

const FLAG_NAMES = {
  '--dry-run': 'dryRun',
  '--overwrite': 'overwrite',
  '--allow-skips': 'allowSkips',
  '--no-events': 'noEvents',
} as const;

function splitOnce(arg: string): [string, string] {
  const at = arg.indexOf('=');
  return [arg.slice(0, at), arg.slice(at + 1)];
}
