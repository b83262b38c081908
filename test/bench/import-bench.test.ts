import { describe, expect, it } from 'vitest';
import { checkImportTargets, importRatio, type ImportBenchResult } from '../../bench/support/import-load.js';
import { REALISTIC_MIX, userOf, userPushData } from '../../bench/support/synapse-population.js';
import { mapUser } from '../../src/import/map-user.js';

const RESULT: ImportBenchResult = {
  users: 1000,
  rules: 0,
  pushers: 0,
  fileBytes: 0,
  generateMs: 0,
  batchSize: 500,
  storeUsersPerSecond: 2000,
  storeInImportUsersPerSecond: 1000,
  importUsersPerSecond: 500,
  readMapUsersPerSecond: 0,
};

describe('the import bench', () => {
  it.each([
    [500, 0.5, true],
    [499, 0.499, false],
    [1500, 1.5, true],
  ])(
    'an importer at %i users/s against a store at 1000 in the same minutes is %d of it: met %s',
    (rate, ratio, met) => {
      const result = { ...RESULT, importUsersPerSecond: rate };
      expect(importRatio(result)).toBeCloseTo(ratio);
      expect(checkImportTargets(result)[0]?.met).toBe(met);
    },
  );

  it('generates the same users on every run', () => {
    expect(userPushData(1234)).toEqual(userPushData(1234));
  });

  it('generates the mix it says, every row of it importable', () => {
    const users = 2000;
    let withRules = 0;
    let changedDefaults = 0;
    let withPushers = 0;
    for (let index = 0; index < users; index += 1) {
      const data = userPushData(index);
      if (data.rules.some((row) => row.priority_class > 0)) {
        withRules += 1;
        expect(data.rules.length).toBeLessThanOrEqual(50);
      } else if (data.rules.length + data.enables.length > 0) changedDefaults += 1;
      if (data.pushers.length > 0) {
        withPushers += 1;
        expect(data.pushers.length).toBeLessThanOrEqual(3);
      }
      const mapped = mapUser({ userId: userOf(index), known: true, ...data }, { allowInsecureGateways: false });
      expect(mapped.skipped).toEqual([]);
    }
    expect(withRules / users).toBeCloseTo(REALISTIC_MIX.withRules, 1);
    expect(changedDefaults / users).toBeCloseTo(REALISTIC_MIX.changedDefaults, 1);
    expect(withPushers / users).toBeCloseTo(REALISTIC_MIX.withPushers, 1);
  });
});
