import { loadConfig } from '../../src/config/load-config.js';

/** `config/default.json` as the worker reads it with no environment: what tests build on. */
export const DEFAULT_CONFIG = loadConfig({});
export const DEFAULT_LIMITS = DEFAULT_CONFIG.limits;
