import { beforeEach, describe } from 'vitest';
import { pushRulesCases } from './push-store-contract-push-rules.js';
import { pusherCases } from './push-store-contract-pushers.js';
import { aUser, type FixtureOptions, type StoreFixture } from './push-store-fixture.js';

/**
 * What every PushStore adapter must do. Run by the in-memory unit test and
 * by the MongoDB integration test with the same expectations.
 */
export function pushStoreContract(
  name: string,
  makeFixture: (options?: FixtureOptions) => Promise<StoreFixture>,
): void {
  describe(`PushStore contract: ${name}`, () => {
    let fixture: StoreFixture;
    let user: string;
    beforeEach(async () => {
      fixture = await makeFixture();
      user = aUser();
    });
    // Each part reads the case's fixture and user in a hook of its own, after this one.
    pushRulesCases(() => ({ fixture, user }), makeFixture);
    pusherCases(() => ({ fixture, user }));
  });
}
