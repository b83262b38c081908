/**
 * A stand-in for evaluate-thread.ts that speaks the same protocol and does
 * what each request's body says, so that the pool's handling of threads
 * that fail can be shown without a store: `{"act": "echo", "n": 1}` answers
 * `{"ok":true,"body":{"echo":1}}`; `hang` never answers; `throw` throws out
 * of the message handler (an uncaught exception ends the thread); `exit`
 * ends the thread with `process.exit(3)`. Invalidations are counted in the
 * cache snapshot of the next answer. With `workerData.failAtStart` the
 * thread throws before it is ready.
 */
import { parentPort, workerData, threadId } from 'node:worker_threads';
import type { FromThread, ToThread } from '../../../src/evaluate-threads/thread-messages.js';

const port = parentPort;
if (port === null) throw new Error('a worker thread');
if ((workerData as { failAtStart?: boolean }).failAtStart === true) throw new Error('cannot start');
let invalidations = 0;
port.on('message', (message: ToThread) => {
  if (message.type === 'invalidate') invalidations += 1;
  if (message.type === 'clear') invalidations += 100;
  if (message.type !== 'evaluate') return;
  const request = JSON.parse(new TextDecoder().decode(message.body)) as { act: string; n?: number };
  if (request.act === 'hang') return;
  if (request.act === 'throw') throw new Error('thrown by the scripted thread');
  if (request.act === 'exit') process.exit(3);
  const bytes = new TextEncoder().encode(JSON.stringify({ ok: true, body: { echo: request.n, thread: threadId } }));
  const answer: FromThread = {
    type: 'done',
    id: message.id,
    bytes,
    stats: { recipients: 1, notified: 1, cacheHits: 1, loaded: 0, storeQueries: 0 },
    cache: { size: 1, bytes: 10, hits: 1, misses: 0, invalidations, staleRefreshes: 0, evictions: 0 },
  };
  port.postMessage(answer, [bytes.buffer]);
});
port.postMessage({ type: 'ready' } satisfies FromThread);
