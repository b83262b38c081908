import { StoreUnavailableError } from '../../src/store/push-store.js';
import type { PartitionLeaseStore } from '../../src/store/partition-lease-store.js';

/**
 * The lease store as one worker reaches it: every call fails with
 * `StoreUnavailableError` while `link.cut` (that worker cannot reach MongoDB),
 * while the others reach the same store.
 */
export function aCuttableLeaseStore(leases: PartitionLeaseStore): {
  readonly store: PartitionLeaseStore;
  readonly link: { cut: boolean };
} {
  const link = { cut: false };
  const store = new Proxy(leases, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        if (link.cut) throw new StoreUnavailableError('the store cannot be reached');
        return (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      };
    },
  });
  return { store, link };
}
