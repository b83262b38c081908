import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { InMemoryPartitionLeaseStore } from '../../src/store/in-memory-partition-lease-store.js';
import { deliveryStoreContract } from './delivery-store-contract.js';
import { partitionLeaseStoreContract } from './partition-lease-store-contract.js';

// The contract hands back the store it made: the one instance whose old-layout request is stored.
let current = new InMemoryDeliveryStore();
deliveryStoreContract(
  'in memory',
  async () => {
    await Promise.resolve();
    current = new InMemoryDeliveryStore();
    return current;
  },
  async (_store, delivery) => {
    await Promise.resolve();
    current.storeUnpartitioned(delivery);
  },
  async (_store, partitions) => {
    await Promise.resolve();
    return current.withPartitions(partitions);
  },
);

partitionLeaseStoreContract('in memory', async () => {
  await Promise.resolve();
  return new InMemoryPartitionLeaseStore();
});
