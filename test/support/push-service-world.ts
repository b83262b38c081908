import type { PushServiceOptions } from '../../src/service/push-service.js';
import { DEFAULT_LIMITS } from './default-config.js';

/** Options of a push service for the tests of test/service/push-service*.test.ts: no waiting between retries. */
export const OPTIONS: PushServiceOptions = {
  maxWriteAttempts: 4,
  backoff: { baseMs: 0, maxMs: 0 },
  pusherPolicy: { allowInsecureGateways: false },
  limits: DEFAULT_LIMITS,
};
