import type { PushStore } from '../../src/store/push-store.js';

/**
 * A store that forwards every call to `inner` except the ones overridden:
 * how tests make one operation slow, racing or failing.
 */
export function wrapStore(inner: PushStore, overrides: Partial<PushStore> = {}): PushStore {
  return {
    loadPushRules: async (u, id) => inner.loadPushRules(u, id),
    loadManyPushRules: async (users) => inner.loadManyPushRules(users),
    savePushRules: async (u, v, r, d, record) => inner.savePushRules(u, v, r, d, record),
    insertPushRulesIfAbsent: async (u, r, d) => inner.insertPushRulesIfAbsent(u, r, d),
    eraseUserData: async (u, v, erasure) => inner.eraseUserData(u, v, erasure),
    listPushers: async (u) => inner.listPushers(u),
    listPushersOfUsers: async (users) => inner.listPushersOfUsers(users),
    upsertPusher: async (p) => inner.upsertPusher(p),
    deletePusher: async (k) => inner.deletePusher(k),
    deletePushers: async (deletion) => inner.deletePushers(deletion),
    deleteRejectedPusher: async (rejected) => inner.deleteRejectedPusher(rejected),
    deletePushersOfOtherUsers: async (k) => inner.deletePushersOfOtherUsers(k),
    bumpPushersVersion: async (u, record) => inner.bumpPushersVersion(u, record),
    findRecordedWrite: async (u, id) => inner.findRecordedWrite(u, id),
    recordWrite: async (u, record) => inner.recordWrite(u, record),
    recordWriteAtVersion: async (u, v, record) => inner.recordWriteAtVersion(u, v, record),
    ...overrides,
  };
}
