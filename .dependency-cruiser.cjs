/**
 * The layers of src/ (docs/architecture.md): a folder may import only the
 * folders listed for it, all of them below it, so every arrow points down
 * and no folder can reach back up. No cycle either, not even of types.
 * `npm run check:deps` (and CI) fails on any rule below.
 */

/** Each folder of src/ and the folders it may import (besides itself). */
const LAYERS = {
  // The bottom: nothing of ours.
  errors: [],
  logging: [],
  retry: [],
  config: [],
  result: ['errors'],
  matrix: ['errors', 'result'],
  // The domain: pure, no I/O.
  'push-rules': ['errors', 'result', 'matrix'],
  pushers: ['errors', 'result', 'matrix'],
  evaluation: ['push-rules', 'errors', 'result', 'matrix'],
  // What both ends of the wire agree on.
  contract: ['push-rules', 'pushers', 'evaluation', 'errors', 'result', 'matrix'],
  // Adapters and services.
  store: ['push-rules', 'pushers', 'config', 'errors', 'result', 'matrix'],
  amqp: ['retry', 'config', 'logging'],
  service: ['store', 'contract', 'retry', 'push-rules', 'pushers', 'evaluation', 'errors', 'result', 'matrix'],
  consumer: [
    'delivery-service',
    'delivery',
    'service',
    'contract',
    'amqp',
    'store',
    'retry',
    'config',
    'logging',
    'push-rules',
    'pushers',
    'evaluation',
    'errors',
    'result',
    'matrix',
  ],
  client: [
    'contract',
    'amqp',
    'retry',
    'config',
    'logging',
    'push-rules',
    'pushers',
    'evaluation',
    'errors',
    'result',
    'matrix',
  ],
  // Push delivery's planning (payloads, batches, backoff, breaker, address policy): pure.
  delivery: ['contract', 'pushers', 'push-rules', 'retry', 'config', 'errors', 'result', 'matrix'],
  // Push delivery's HTTP client: the one adapter that talks to push gateways.
  'delivery-http': ['delivery', 'contract', 'config', 'logging', 'retry', 'errors', 'matrix', 'result'],
  // Push delivery at work: the intake of `notify` messages and the scheduler that sends them (docs/delivery.md).
  'delivery-service': [
    'delivery',
    'service',
    'store',
    'contract',
    'pushers',
    'retry',
    'logging',
    'errors',
    'result',
    'matrix',
  ],
  // Evaluation off the event loop: the pool of worker threads and the thread itself (a consumer's evaluator).
  'evaluate-threads': [
    'consumer',
    'service',
    'retry',
    'store',
    'contract',
    'evaluation',
    'config',
    'logging',
    'errors',
    'result',
    'matrix',
  ],
  // Push delivery on a thread of its own: the thread, its wiring, and the main thread's side (health, metrics, logs).
  'delivery-thread': [
    'observability',
    'consumer',
    'client',
    'delivery-service',
    'delivery-http',
    'delivery',
    'service',
    'store',
    'contract',
    'amqp',
    'retry',
    'config',
    'logging',
    'pushers',
    'errors',
    'result',
    'matrix',
  ],
  observability: ['consumer', 'delivery-service', 'delivery', 'service', 'amqp', 'retry', 'config', 'logging'],
  gateway: [
    'client',
    'contract',
    'amqp',
    'observability',
    'config',
    'logging',
    'push-rules',
    'pushers',
    'errors',
    'result',
    'matrix',
  ],
  lifecycle: ['observability', 'config', 'logging'],
  // The push gateway for development (`npm run push-gateway:local`): the push gateway API's server side.
  'local-push-gateway': ['delivery'],
  // Import from Synapse: its rows mapped onto our rulesets and pushers, pure (docs/import-from-synapse.md).
  import: ['push-rules', 'pushers', 'matrix', 'errors', 'result', 'config'],
  // The importer's adapters: Synapse's database, the store's import writes, change events, the command.
  'import-io': [
    'import',
    'store',
    'contract',
    'amqp',
    'config',
    'logging',
    'push-rules',
    'pushers',
    'matrix',
    'errors',
    'result',
  ],
};

const folders = Object.keys(LAYERS);

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle, even of types, ties its files into one unit that can only be understood and changed together.',
      // Everywhere: the benchmark, the scripts and the tests too, not only src/.
      from: { path: '^(src|bench|scripts|test|examples)/' },
      to: { circular: true },
    },
    {
      name: 'no-unknown-folder',
      severity: 'error',
      comment:
        'Every folder of src/ has its place in the layers: add a new one to LAYERS (and to docs/architecture.md).',
      from: { path: '^src/[^/]+/', pathNot: `^src/(${folders.join('|')})/` },
      to: {},
    },
    {
      name: 'no-entry-point-import',
      severity: 'error',
      comment:
        'The files at the top of src/ (entry points and the worker process) compose everything; nothing imports them.',
      from: { path: '^src/[^/]+/' },
      to: { path: '^src/[^/]+\\.ts$' },
    },
    {
      name: 'main-thread-without-delivery-stack',
      severity: 'error',
      comment:
        "The worker's main thread (worker-process.ts and all it reaches) must not load the push delivery stack: only the delivery thread runs it, and in the main thread's heap it costs ~4 MB of heap and ~11 MB resident for nothing (the HTTP client, undici, the scheduler, the journal).",
      from: { path: '^src/worker-process\\.ts$' },
      to: {
        path: '^src/(delivery-http|delivery-service/(delivery-scheduler|delivery-journal|notify-intake)|delivery-thread/(worker-delivery|delivery-runtime))\\.?',
        reachable: true,
      },
    },
    ...folders.map((folder) => ({
      name: `layer-${folder}`,
      severity: 'error',
      comment: `src/${folder}/ may import only ${LAYERS[folder].length === 0 ? 'nothing of ours' : LAYERS[folder].map((f) => `src/${f}/`).join(', ')}.`,
      from: { path: `^src/${folder}/` },
      to: { path: '^src/', pathNot: `^src/(${[folder, ...LAYERS[folder]].join('|')})/` },
    })),
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports count: a cycle of types is still a cycle.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    includeOnly: '^(src|bench|scripts|test|examples)/',
  },
};
