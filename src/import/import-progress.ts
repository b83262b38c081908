/** Where a run stands, for the progress bar or the periodic line. */
export interface ProgressState {
  readonly done: number;
  /** Users to do in all, when known. */
  readonly total?: number | undefined;
  readonly elapsedMs: number;
}

const NUMBER = new Intl.NumberFormat('en-US');

/** Users per second so far; 0 before the first second's worth of time. */
export function usersPerSecond({ done, elapsedMs }: ProgressState): number {
  return elapsedMs <= 0 ? 0 : (done * 1000) / elapsedMs;
}

/** Time left at the rate so far, in ms; undefined without a total or a rate. */
export function etaMs(state: ProgressState): number | undefined {
  const rate = usersPerSecond(state);
  if (state.total === undefined || rate === 0) return undefined;
  return (Math.max(0, state.total - state.done) * 1000) / rate;
}

/** `1h02m`, `4m05s`, `12s`. */
export function formatDuration(ms: number): string {
  const seconds = Math.round(ms / 1000);
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  if (h > 0) return `${h}h${String(m).padStart(2, '0')}m`;
  if (m > 0) return `${m}m${String(s).padStart(2, '0')}s`;
  return `${s}s`;
}

/** The figures of a progress line: `12,000/100,000 users (12%), 2,400 users/s, ETA 36s`. */
export function formatProgress(state: ProgressState): string {
  const rate = NUMBER.format(Math.round(usersPerSecond(state)));
  const eta = etaMs(state);
  const of =
    state.total === undefined
      ? `${NUMBER.format(state.done)} users`
      : `${NUMBER.format(state.done)}/${NUMBER.format(state.total)} users (${percent(state)}%)`;
  return `${of}, ${rate} users/s${eta === undefined ? '' : `, ETA ${formatDuration(eta)}`}`;
}

/** A bar of `width` cells for a terminal: `[#######.......]`. */
export function formatBar(state: ProgressState, width: number): string {
  if (state.total === undefined || state.total === 0) return '';
  const filled = Math.min(width, Math.floor((state.done / state.total) * width));
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
}

function percent({ done, total }: ProgressState): number {
  return total === undefined || total === 0 ? 100 : Math.min(100, Math.floor((done * 100) / total));
}
