import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { gunzipSync } from 'node:zlib';
import { ROOT } from './processes.js';
import { WORKLOAD_PATH } from '../../test/support/evaluate-bench-fixtures.js';

/**
 * Synapse's own evaluator on the same workload, in the same run: the
 * steering team's `synapse.sh` (see its README in the evaluate-bench
 * folder). That folder is shared and must stay as it is, and `synapse.sh`
 * writes its results next to itself, so the scripts are copied into a
 * temporary directory with the repository's workload (the same bytes as
 * the folder's `workload.json`) and run there, always with `--no-expected`.
 */

/** The files of the evaluate-bench folder the run needs; `synapse_eval.py` imports `spec_reference.py`. */
const SCRIPTS = ['synapse.sh', 'synapse_eval.py', 'spec_reference.py'] as const;

/** `EVALUATE_BENCH_DIR`, or the `shared/evaluate-bench` folder beside the repository. */
export function evaluateBenchDir(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(ROOT, env['EVALUATE_BENCH_DIR'] ?? '../shared/evaluate-bench');
}

export interface SynapseRow {
  readonly row: string;
  readonly pairs: number;
  /** Median µs per pair with the evaluator built per event (`+setup`): the figure to compare with. */
  readonly usPerPairWithSetup: number;
  readonly usPerPairRunOnly: number;
  /** Samples of each figure. */
  readonly samples: number;
}

export type SynapseRun =
  | {
      readonly measured: true;
      readonly synapseVersion: string;
      readonly python: string;
      readonly loadAverageAtStart: number | undefined;
      readonly repsMin: number;
      readonly seconds: number;
      readonly rows: readonly SynapseRow[];
    }
  | { readonly measured: false; readonly reason: string };

/** The rows of `synapse-results.json`, or why they cannot be read. */
export function parseSynapseResults(json: unknown): {
  rows: SynapseRow[];
  synapseVersion: string;
  python: string;
  loadAverageAtStart: number | undefined;
  repsMin: number;
} {
  const doc = json as {
    synapse_version?: unknown;
    python?: unknown;
    load_average_at_start?: unknown;
    reps_min?: unknown;
    rows?: unknown;
  };
  if (!Array.isArray(doc.rows)) throw new Error('synapse-results.json has no rows');
  const rows = (doc.rows as Record<string, unknown>[]).map((r) => {
    const withSetup = r['us_per_pair_with_setup'];
    const runOnly = r['us_per_pair_run_only'];
    if (
      typeof r['row'] !== 'string' ||
      typeof withSetup !== 'number' ||
      typeof runOnly !== 'number' ||
      typeof r['pairs'] !== 'number'
    ) {
      throw new Error(`synapse-results.json: a row without its figures: ${JSON.stringify(r).slice(0, 200)}`);
    }
    const samples = Array.isArray(r['samples_ms_with_setup']) ? r['samples_ms_with_setup'].length : 0;
    return { row: r['row'], pairs: r['pairs'], usPerPairWithSetup: withSetup, usPerPairRunOnly: runOnly, samples };
  });
  return {
    rows,
    synapseVersion: typeof doc.synapse_version === 'string' ? doc.synapse_version : '?',
    python: typeof doc.python === 'string' ? doc.python : '?',
    loadAverageAtStart: typeof doc.load_average_at_start === 'number' ? doc.load_average_at_start : undefined,
    repsMin: typeof doc.reps_min === 'number' ? doc.reps_min : Number.NaN,
  };
}

export interface SynapseOptions {
  /** Minimum timed repetitions per row and figure (`synapse.sh --reps`). */
  readonly reps: number;
  /** Only these rows (`--rows`); all when empty. */
  readonly rows?: readonly string[];
  readonly dir?: string;
  /** Each line synapse.sh prints, for progress. */
  readonly onLine?: (line: string) => void;
}

/**
 * Runs a copy of `synapse.sh --no-expected` in a temporary directory and
 * reads what it wrote there. Never throws: a folder that is missing, a
 * venv that cannot be made or a run that fails is reported as not measured,
 * with the reason.
 */
export async function runSynapseAnchor(options: SynapseOptions): Promise<SynapseRun> {
  const dir = options.dir ?? evaluateBenchDir();
  const missing = SCRIPTS.filter((file) => !existsSync(join(dir, file)));
  if (missing.length > 0)
    return { measured: false, reason: `${missing.join(', ')} not found in ${dir} (set EVALUATE_BENCH_DIR)` };
  const work = mkdtempSync(join(os.tmpdir(), 'bench-synapse-'));
  try {
    for (const file of SCRIPTS) copyFileSync(join(dir, file), join(work, file));
    writeFileSync(join(work, 'workload.json'), gunzipSync(readFileSync(WORKLOAD_PATH)));
    const args = [join(work, 'synapse.sh'), '--no-expected', '--reps', String(options.reps)];
    if (options.rows !== undefined && options.rows.length > 0) args.push('--rows', options.rows.join(','));
    const started = performance.now();
    const { code, tail } = await run('bash', args, work, options.onLine);
    const seconds = (performance.now() - started) / 1000;
    if (code !== 0)
      return { measured: false, reason: `synapse.sh exited ${String(code)}: ${tail.join(' | ').slice(-600)}` };
    const resultsFile = join(work, 'synapse-results.json');
    if (!existsSync(resultsFile)) return { measured: false, reason: 'synapse.sh wrote no synapse-results.json' };
    const parsed = parseSynapseResults(JSON.parse(readFileSync(resultsFile, 'utf8')));
    return { measured: true, seconds, ...parsed };
  } catch (error) {
    return { measured: false, reason: error instanceof Error ? error.message : String(error) };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

async function run(
  command: string,
  args: readonly string[],
  cwd: string,
  onLine?: (line: string) => void,
): Promise<{ code: number | null; tail: string[] }> {
  const child = spawn(command, args, { cwd, env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  const tail: string[] = [];
  const keep = (line: string) => {
    tail.push(line);
    if (tail.length > 20) tail.shift();
    onLine?.(line);
  };
  createInterface({ input: child.stdout }).on('line', keep);
  createInterface({ input: child.stderr }).on('line', keep);
  return new Promise((resolveRun) => {
    child.once('error', (error) => {
      keep(`cannot start ${command}: ${error.message}`);
    });
    child.once('close', (code) => {
      resolveRun({ code, tail });
    });
  });
}
