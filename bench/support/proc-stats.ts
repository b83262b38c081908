import { readFileSync } from 'node:fs';

/** Linux's USER_HZ: /proc times are in these ticks on every common build. */
const TICKS_PER_SECOND = 100;

/** CPU seconds (user + system) a process has used so far; NaN once it is gone. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which may contain spaces, closed by ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 here.
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return Number.NaN;
  }
}

/**
 * Seconds the process's main thread (for Node, the JavaScript thread) has
 * spent runnable but waiting for a CPU (`/proc/<pid>/schedstat`, second
 * field); NaN once it is gone or without schedstats.
 */
export function runQueueWaitSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/schedstat`, 'utf8').trim().split(' ');
    return Number(fields[1]) / 1e9;
  } catch {
    return Number.NaN;
  }
}

/** A `VmRSS`-style field of /proc/<pid>/status in bytes; NaN once it is gone. */
function statusBytes(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    return match?.[1] === undefined ? Number.NaN : Number(match[1]) * 1024;
  } catch {
    return Number.NaN;
  }
}

export const rssBytes = (pid: number) => statusBytes(pid, 'VmRSS');
/** The highest resident set size the process has had (the kernel's high-water mark). */
export const peakRssBytes = (pid: number) => statusBytes(pid, 'VmHWM');

/** CPU use of some processes (and of this one, as `load`) from now until `stop`, in % of one core. */
export function startCpuWatch(watched: Readonly<Record<string, number | undefined>>): {
  stop(): Record<string, number>;
} {
  const before = Object.fromEntries(
    Object.entries(watched).map(([name, pid]) => [name, pid === undefined ? Number.NaN : cpuSeconds(pid)]),
  );
  const loadBefore = process.cpuUsage();
  const started = performance.now();
  return {
    stop: () => {
      const wallSeconds = (performance.now() - started) / 1000;
      const load = process.cpuUsage(loadBefore);
      const cpu: Record<string, number> = { load: ((load.user + load.system) / 1e6 / wallSeconds) * 100 };
      for (const [name, pid] of Object.entries(watched)) {
        if (pid !== undefined) cpu[name] = ((cpuSeconds(pid) - (before[name] ?? Number.NaN)) / wallSeconds) * 100;
      }
      return cpu;
    },
  };
}
