import { afterEach, describe, expect, it } from 'vitest';
import { PushRulesClient, type RpcTransport } from '../../src/client/push-rules-client.js';
import { EncodedBody } from '../../src/client/encoded-body.js';
import { evaluateInProcess, evaluateLimits } from '../../src/consumer/evaluate-queue.js';
import { encodeReply, type Reply } from '../../src/contract/reply.js';
import type { CompiledRuleset } from '../../src/evaluation/compiled-ruleset.js';
import type { JsonValue } from '../../src/matrix/json.js';
import { EvaluateService } from '../../src/service/evaluate-service.js';
import { RulesetCache } from '../../src/service/ruleset-cache.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import { DEFAULT_CONFIG } from '../support/default-config.js';

/*
 * The client's coalescing against the worker's own parsing and evaluation
 * (no broker): one event nested deep, from any room member, must fail
 * alone, and an event the single form takes must be taken coalesced too.
 */

const clients: PushRulesClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map(async (client) => client.close()));
});

/** A client whose messages are answered by `evaluateInProcess` a few ms later, so that calls made meanwhile coalesce. */
function aClientAndWorker() {
  const cache = new RulesetCache<CompiledRuleset>({ maxEntries: 1000, maxBytes: 1 << 24, maxStalenessMs: 60_000 });
  const service = new EvaluateService(new InMemoryPushStore(), { cache, loadChunkSize: 100, sliceMs: 10 });
  const run = evaluateInProcess(service, evaluateLimits(DEFAULT_CONFIG.evaluate, DEFAULT_CONFIG.limits.maxJsonDepth));
  const messages: string[] = [];
  const transport: RpcTransport = {
    request: async (body) => {
      const json = body instanceof EncodedBody ? body.json : JSON.stringify(body);
      messages.push(json);
      await new Promise((resolve) => setTimeout(resolve, 5));
      const outcome = await run(Buffer.from(json), { deadline: undefined });
      return JSON.parse(encodeReply(outcome.reply)) as Reply;
    },
    publish: async () => Promise.resolve(),
    close: async () => Promise.resolve(),
  };
  const client = new PushRulesClient({ url: 'amqp://unused', evaluateCoalescing: { windowMs: 1_000 } }, transport);
  clients.push(client);
  return { client, messages };
}

const ROOM = { member_count: 2 };
const recipients = [{ user_id: '@a:example.org' }];
const message = (body: string, content: Record<string, JsonValue> = {}) => ({
  type: 'm.room.message',
  room_id: '!r:example.org',
  sender: '@s:example.org',
  content: { msgtype: 'm.text', body, ...content },
});
/** A message whose content nests `levels` arrays (the single form's body is then `levels + 3` deep). */
const deep = (levels: number) =>
  message('deep', { n: JSON.parse('['.repeat(levels) + ']'.repeat(levels)) as JsonValue });

describe('PushRulesClient.evaluate, coalesced, against the worker', () => {
  it.each([
    ['refused alone (40 levels) fails alone; its neighbours are answered', 40, 'rejected'],
    ['taken alone (29 levels: 32 in the single form) is taken coalesced too', 29, 'fulfilled'],
  ])('an event %s', async (_name, levels, status) => {
    const { client, messages } = aClientAndWorker();
    await expect(client.evaluate(message('hello'), ROOM, recipients)).resolves.toMatchObject({ evaluated: 1 });
    const first = client.evaluate(message('one'), ROOM, recipients);
    const calls = [
      client.evaluate(message('two'), ROOM, recipients),
      client.evaluate(deep(levels), ROOM, recipients),
      client.evaluate(message('three'), ROOM, recipients),
    ];
    await first;
    const settled = await Promise.allSettled(calls);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', status, 'fulfilled']);
    if (status === 'rejected')
      expect(settled[1]).toMatchObject({
        reason: { kind: 'BadJson', message: 'Request body nests arrays and objects deeper than 32 levels.' },
      });
    // The neighbours went together.
    expect(messages.some((json) => json.includes('"events"'))).toBe(true);
  });
});
