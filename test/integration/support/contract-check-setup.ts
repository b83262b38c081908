import { afterEach, expect } from 'vitest';
import { installContractCheck, takeContractProblems } from '../../support/contract-check.js';

// Every integration test's AMQP traffic is held to contract/schemas/
// (test/support/contract-check.ts): a message that breaks it fails the test
// that sent or received it.
installContractCheck();

afterEach(() => {
  expect(takeContractProblems(), 'messages that break contract/schemas/').toEqual([]);
});
