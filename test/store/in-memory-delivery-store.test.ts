import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';
import { deliveryStoreContract } from './delivery-store-contract.js';

deliveryStoreContract('in memory', async () => {
  await Promise.resolve();
  return new InMemoryDeliveryStore();
});
