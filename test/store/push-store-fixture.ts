import type { PushStore } from '../../src/store/push-store.js';

export interface StoreFixture {
  readonly store: PushStore;
  /** Puts a raw push-rules entry in place, bypassing the port. */
  readonly putRaw: (
    userId: string,
    entry: { contentJson?: string | number; defaultsRevision?: string },
  ) => Promise<void>;
}

export interface FixtureOptions {
  readonly recordedWritesWindow?: number;
}

/** What a case of the contract runs on: a fixture and a user of its own, new for each case. */
export interface ContractCase {
  readonly fixture: StoreFixture;
  readonly user: string;
}

export let counter = 0;
export const aUser = () => `@contract${Date.now()}x${(counter += 1)}:example.org`;
