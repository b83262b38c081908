import { createInterface } from 'node:readline';
import { PushRulesClient } from './client/push-rules-client.js';
import { replyThroughClient } from './client/wire-adapter.js';

/**
 * `npm run --silent wire`: the TypeScript client's wire adapter for the
 * conformance run (docs/rpc-contract.md#examples). Reads one JSON line per
 * request on stdin, `{"id", "request"}`, calls the client's typed method
 * for it (src/client/wire-adapter.ts) and writes one line per answer on
 * stdout, `{"id", "reply"}`, as each comes (not in the order read), or
 * `{"id", "adapter_error"}` for a line it could not turn into a call.
 * Settings: AMQP_URL (required), PUBLISHER_USER_ID (absent or empty: the
 * requests carry no AMQP userId). Exits once stdin ends and every answer is
 * written.
 */
const url = process.env['AMQP_URL'];
if (url === undefined || url === '') {
  process.stderr.write('wire: AMQP_URL is required\n');
  process.exit(2);
}
const publisher = process.env['PUBLISHER_USER_ID'];
const client = new PushRulesClient({
  url,
  ...(publisher === undefined || publisher === '' ? {} : { publisherUserId: publisher }),
});

const write = (answer: object) => process.stdout.write(`${JSON.stringify(answer)}\n`);

async function answer(line: string): Promise<void> {
  let id: unknown;
  try {
    const parsed = JSON.parse(line) as { id?: unknown; request?: unknown };
    id = parsed.id;
    const { request } = parsed;
    if (typeof id !== 'string') throw new Error('the line has no string id');
    if (typeof request !== 'object' || request === null || Array.isArray(request))
      throw new Error('the line has no request object');
    write({ id, reply: await replyThroughClient(client, request as Record<string, unknown>) });
  } catch (error) {
    write({
      id: typeof id === 'string' ? id : null,
      adapter_error: error instanceof Error ? error.message : String(error),
    });
  }
}

const pending = new Set<Promise<void>>();
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  if (line.trim() === '') return;
  const answered = answer(line).finally(() => pending.delete(answered));
  pending.add(answered);
});
lines.once('close', () => {
  void Promise.allSettled([...pending]).then(async () => {
    await client.close();
  });
});
