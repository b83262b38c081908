import { importCommand } from './import-io/import-command.js';

/**
 * `npm run import:synapse -- --from …`: Synapse's push rules and pushers
 * into the store (docs/import-from-synapse.md). The first Ctrl-C stops the
 * run after the batch it is writing; a second one ends it at once.
 */
const stop = new AbortController();
process.on('SIGINT', () => {
  if (stop.signal.aborted) process.exit(130);
  process.stderr.write('\nimport:synapse: stopping after the current batch (Ctrl-C again to quit at once)\n');
  stop.abort();
});
process.on('SIGTERM', () => {
  stop.abort();
});

process.exitCode = await importCommand(process.argv.slice(2), process.env, {
  stdout: process.stdout,
  stderr: process.stderr,
  stop: stop.signal,
});
