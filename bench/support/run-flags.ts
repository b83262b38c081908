/** `npm run bench`'s command line (bench/run.ts lists the flags). */
import { parseArgs } from 'node:util';
import { ROOT } from './processes.js';

export const { values: flags } = parseArgs({
  options: {
    seconds: { type: 'string' },
    warmup: { type: 'string' },
    long: { type: 'boolean', default: false },
    only: { type: 'string' },
    profile: { type: 'boolean', default: false },
    reps: { type: 'string' },
    'synapse-rows': { type: 'string' },
    'cold-samples': { type: 'string' },
    'heap-profile': { type: 'boolean', default: false },
    'import-users': { type: 'string' },
    'delivery-outage-seconds': { type: 'string' },
    'delivery-outage-room': { type: 'string' },
    'delivery-rounds': { type: 'string' },
    'synapse-members': { type: 'string' },
    'synapse-sends': { type: 'string' },
    'synapse-batch': { type: 'string' },
  },
});
export const MEASURE_MS = Number(flags.seconds ?? (flags.long ? 10 : 3)) * 1000;
export const WARMUP_MS = Number(flags.warmup ?? (flags.long ? 2 : 1)) * 1000;
export const ONLY = flags.only === undefined ? undefined : new RegExp(flags.only);
export const PROFILE_ARGS = flags.profile ? ['--cpu-prof', '--cpu-prof-dir', `${ROOT}bench/results/profiles`] : [];
