import type { Db } from 'mongodb';
import { describe, expect, it } from 'vitest';
import { MongoPushStore } from '../../src/store/mongo-push-store.js';

/**
 * The store's reads fill caches that only change events drop: a read from
 * a lagging secondary after the event would be kept for the whole staleness
 * bound. Every collection it reads is opened on the primary, whatever the
 * URL's `readPreference`.
 */
describe('MongoPushStore: reads go to the primary', () => {
  it('opens every collection with readPreference primary', () => {
    const opened: { name: string; options: unknown }[] = [];
    const db = {
      collection: (name: string, options?: unknown) => {
        opened.push({ name, options });
        return { collectionName: name };
      },
    } as unknown as Db;
    new MongoPushStore(db, { accountDataCollection: 'account_data', pushersCollection: 'pushers' });
    expect(opened.length).toBeGreaterThan(0);
    for (const { name, options } of opened) expect(options, name).toMatchObject({ readPreference: 'primary' });
  });
});
