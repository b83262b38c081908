import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import { importStoreContract } from './import-store-contract.js';
import { pushStoreContract } from './push-store-contract.js';

pushStoreContract('in memory', async (options) => {
  const store = new InMemoryPushStore(options);
  await Promise.resolve();
  return {
    store,
    putRaw: async (userId, entry) => {
      await Promise.resolve();
      const { contentJson, defaultsRevision } = entry;
      store.putRawPushRules(userId, {
        ...(contentJson === undefined ? {} : { contentJson: String(contentJson) }),
        ...(defaultsRevision === undefined ? {} : { defaultsRevision }),
      });
    },
  };
});

importStoreContract('in memory', async () => {
  const store = new InMemoryPushStore();
  await Promise.resolve();
  return {
    store,
    markImportUnfinished: async (userId) => {
      await Promise.resolve();
      store.markImportUnfinished(userId);
    },
  };
});
