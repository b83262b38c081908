import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import type { PushServiceOptions } from '../../src/service/push-service.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import { ALICE } from './builders.js';
import { DEFAULT_LIMITS } from './default-config.js';

/** Options of a push service for the tests of test/service/push-service*.test.ts: no waiting between retries. */
export const OPTIONS: PushServiceOptions = {
  maxWriteAttempts: 4,
  backoff: { baseMs: 0, maxMs: 0 },
  pusherPolicy: { allowInsecureGateways: false },
  limits: DEFAULT_LIMITS,
};

/** A store holding the server-default rules of Alice. */
export async function withDefaults(): Promise<InMemoryPushStore> {
  const store = new InMemoryPushStore();
  await store.savePushRules(ALICE, 0, serverDefaultRuleset(ALICE), 'v1.19');
  return store;
}
