import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    environment: 'node',
    // Integration files share one broker and one database server, and some
    // start worker processes: run files one at a time (unit files take ~1 s).
    fileParallelism: false,
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/**/*.test.ts'],
          exclude: ['test/integration/**', 'test/faults/**', 'test/examples/**', 'test/package/**'],
          // Explicit: vitest puts files of group 0 without file
          // parallelism in a group of their own that runs after every
          // numbered group, so with a default order the faults ran first.
          sequence: { groupOrder: 1 },
        },
      },
      {
        test: {
          name: 'integration',
          // The examples and the packed package need the broker, a build, or both.
          include: ['test/integration/**/*.test.ts', 'test/examples/**/*.test.ts', 'test/package/**/*.test.ts'],
          globalSetup: ['test/integration/global-setup.ts'],
          // Every request and reply the tests send and receive, held to contract/schemas/.
          setupFiles: ['test/integration/support/contract-check-setup.ts'],
          sequence: { groupOrder: 1 },
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          // They stop and start the shared services: after every other
          // project (a higher group runs later), one file at a time.
          name: 'faults',
          include: ['test/faults/**/*.test.ts'],
          globalSetup: ['test/faults/global-setup.ts'],
          sequence: { groupOrder: 2 },
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
