import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { parseAddressAllowlist } from '../../src/delivery/address-allowlist.js';
import { classifyExchange, type GatewayExchange } from '../../src/delivery/response-outcome.js';
import { GatewayClientClosedError } from '../../src/delivery-http/gateway-client.js';
import { ALICE } from '../support/builders.js';
import {
  aClient,
  aDnsServer,
  aGateway,
  byName,
  notifyBody,
  servers,
  useGatewayClientWorld,
} from '../support/gateway-client-world.js';
import type { RecordedRequest } from '../support/gateway-double-records.js';
import type { PushGatewayDouble } from '../support/push-gateway-double.js';

useGatewayClientWorld();

const BOB = '@bob:example.org';

/**
 * The most requests a gateway was busy with at once, from the record: each
 * is taken as busy from its arrival until the gateway's delayed answer (the
 * slack absorbs timer and clock granularity; a request sent only after an
 * answer arrives at least `delayMs` after the one answered).
 */
function mostAtOnce(requests: readonly RecordedRequest[], delayMs: number): number {
  const slackMs = 40;
  const arrivals = requests.map((request) => request.at);
  return Math.max(
    ...arrivals.map((at) => arrivals.filter((other) => other <= at && at < other + delayMs - slackMs).length),
  );
}

describe('requests in flight', () => {
  const DELAY_MS = 150;

  it('holds a gateway origin to its cap: 10 sends, cap 2, never more than 2 at the gateway', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'answer', delayMs: DELAY_MS });
    const client = aClient({ maxInFlightPerOrigin: 2 });
    const exchanges = await Promise.all(
      Array.from({ length: 10 }, async (_, index) =>
        client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, `key-${index}`)),
      ),
    );
    expect(exchanges.every((exchange) => exchange.kind === 'response' && exchange.status === 200)).toBe(true);
    expect(gateway.requests).toHaveLength(10);
    expect(mostAtOnce(gateway.requests, DELAY_MS)).toBe(2);
    expect(gateway.connections).toBeLessThanOrEqual(2);
  });

  it('sends them all at once when the cap allows (the measure above can see more than 2)', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'answer', delayMs: DELAY_MS });
    const client = aClient({ maxInFlightPerOrigin: 10 });
    await Promise.all(
      Array.from({ length: 10 }, async (_, index) =>
        client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, `key-${index}`)),
      ),
    );
    expect(mostAtOnce(gateway.requests, DELAY_MS)).toBe(10);
  });

  it('holds all gateways together to the global cap: 2 at once across two origins', async () => {
    const gateways = [await aGateway(), await aGateway()];
    for (const gateway of gateways) gateway.behave({ kind: 'answer', delayMs: DELAY_MS });
    const client = aClient({ maxInFlight: 2, maxInFlightPerOrigin: 10 });
    await Promise.all(
      Array.from({ length: 10 }, async (_, index) => {
        const { notifyUrl } = gateways[index % 2] as PushGatewayDouble;
        return client.send(notifyUrl, notifyBody(notifyUrl, `key-${index}`));
      }),
    );
    expect(gateways.map((gateway) => gateway.requests.length)).toEqual([5, 5]);
    expect(
      mostAtOnce(
        gateways.flatMap((gateway) => gateway.requests),
        DELAY_MS,
      ),
    ).toBe(2);
  });
});

describe('requests in flight per address and per user', () => {
  const DELAY_MS = 150;

  it('lets any number wait for an address by default: a large room on one gateway is sent whole, never turned back', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'answer', delayMs: 20 });
    const client = aClient({ maxInFlightPerAddress: 2, maxInFlightPerOrigin: 2 });
    const exchanges = await Promise.all(
      Array.from({ length: 12 }, async (_, index) =>
        client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, `key-${index}`)),
      ),
    );
    expect(exchanges.map((exchange) => (exchange.kind === 'response' ? exchange.status : exchange.kind))).toEqual(
      Array.from({ length: 12 }, () => 200),
    );
  });

  it('holds an address to its cap however many names point at it; as many wait, the rest are not sent', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'answer', delayMs: DELAY_MS });
    const names = Array.from({ length: 6 }, (_, index) => `n${index}.test`);
    const dns = await aDnsServer(...names);
    const client = aClient({
      maxInFlightPerAddress: 2,
      maxWaitingPerKey: 2,
      maxInFlightPerOrigin: 10,
      dns: { servers: [dns.server] },
    });
    // Each name resolved once first, so that the requests below reach the address's line in call order.
    for (const name of names) await client.send(byName(gateway, name), notifyBody(byName(gateway, name)));
    gateway.clearRequests();
    const exchanges = await Promise.all(
      names.map(async (name, index) =>
        client.send(byName(gateway, name), notifyBody(gateway.notifyUrl, `key-${index}`)),
      ),
    );
    expect(exchanges.map((exchange) => (exchange.kind === 'response' ? exchange.status : exchange))).toEqual([
      200,
      200,
      200,
      200,
      { kind: 'not-sent', reason: 'address-busy' },
      { kind: 'not-sent', reason: 'address-busy' },
    ]);
    expect(classifyExchange(exchanges[5] as GatewayExchange, Date.now())).toEqual({ kind: 'retry', cause: 'busy' });
    expect(gateway.requests).toHaveLength(4);
    expect(mostAtOnce(gateway.requests, DELAY_MS)).toBe(2);
    expect(client.keysHeld).toEqual({ users: 0, origins: 0, addresses: 0 });
  });

  it('keeps a silent address to its cap: another address gets a global slot at once', async () => {
    const silent = await aGateway();
    silent.behave({ kind: 'hang' });
    // A second address of loopback (Linux answers on all of 127.0.0.0/8).
    const healthy = createServer((request, response) => {
      request.resume();
      request.on('end', () => response.end('{"rejected":[]}'));
    });
    servers.push(healthy);
    await new Promise<void>((resolve) => healthy.listen(0, '127.0.0.2', resolve));
    const healthyUrl = `http://127.0.0.2:${(healthy.address() as AddressInfo).port}/_matrix/push/v1/notify`;
    const names = Array.from({ length: 8 }, (_, index) => `silent${index}.test`);
    const dns = await aDnsServer(...names);
    const client = aClient({
      allowlist: parseAddressAllowlist('127.0.0.0/8'),
      maxInFlight: 3,
      maxInFlightPerAddress: 2,
      maxWaitingPerKey: 2,
      headersTimeoutMs: 600,
      dns: { servers: [dns.server] },
    });
    const stuck = names.map(async (name) => client.send(byName(silent, name), notifyBody(silent.notifyUrl)));
    await silent.waitForRequests(2);
    const started = performance.now();
    expect(await client.send(healthyUrl, notifyBody(healthyUrl))).toMatchObject({ status: 200 });
    expect(performance.now() - started).toBeLessThan(500);
    const exchanges = await Promise.all(stuck);
    expect(exchanges.filter((exchange) => exchange.kind === 'not-sent')).toHaveLength(4);
    expect(silent.requests.length).toBeLessThanOrEqual(4);
  });

  it('counts an IP literal and a name of it against one address', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'answer', delayMs: DELAY_MS });
    const dns = await aDnsServer('push.test');
    const client = aClient({ maxInFlightPerAddress: 1, dns: { servers: [dns.server] } });
    await client.send(byName(gateway, 'push.test'), notifyBody(gateway.notifyUrl));
    gateway.clearRequests();
    const literal = gateway.notifyUrl.replace('127.0.0.1', '[::ffff:127.0.0.1]');
    await Promise.all([
      client.send(byName(gateway, 'push.test'), notifyBody(gateway.notifyUrl, 'key-1')),
      client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, 'key-2')),
      client.send(literal, notifyBody(gateway.notifyUrl, 'key-3')),
    ]);
    expect(mostAtOnce(gateway.requests, DELAY_MS)).toBe(1);
  });

  it('holds a user to their cap across gateways, other users unhindered; as many wait, the rest are not sent', async () => {
    const gateways = [await aGateway(), await aGateway()];
    for (const gateway of gateways) gateway.behave({ kind: 'answer', delayMs: DELAY_MS });
    const client = aClient({ maxInFlightPerUser: 2, maxWaitingPerKey: 2 });
    const send = async (userId: string, index: number) => {
      const { notifyUrl } = gateways[index % 2] as PushGatewayDouble;
      return client.send(notifyUrl, notifyBody(notifyUrl, `${userId === ALICE ? 'alice' : 'bob'}-${index}`), {
        userId,
      });
    };
    const alice = Array.from({ length: 5 }, async (_, index) => send(ALICE, index));
    const bob = Array.from({ length: 2 }, async (_, index) => send(BOB, index));
    const [aliceExchanges, bobExchanges] = await Promise.all([Promise.all(alice), Promise.all(bob)]);
    expect(aliceExchanges.map((exchange) => exchange.kind)).toEqual([
      'response',
      'response',
      'response',
      'response',
      'not-sent',
    ]);
    expect(aliceExchanges[4]).toEqual({ kind: 'not-sent', reason: 'user-busy' });
    expect(bobExchanges.map((exchange) => exchange.kind)).toEqual(['response', 'response']);
    const requests = gateways.flatMap((gateway) => gateway.requests);
    const of = (tag: string) => requests.filter((request) => request.pushkeys[0]?.startsWith(tag));
    expect(mostAtOnce(of('alice'), DELAY_MS)).toBe(2);
    expect(mostAtOnce(of('bob'), DELAY_MS)).toBe(2);
    expect(mostAtOnce(requests, DELAY_MS)).toBe(4);
    expect(client.keysHeld).toEqual({ users: 0, origins: 0, addresses: 0 });
  });

  it('puts no cap on a send without a user (the two-argument call)', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'answer', delayMs: DELAY_MS });
    const client = aClient({ maxInFlightPerUser: 1 });
    await Promise.all(
      Array.from({ length: 4 }, async (_, index) =>
        client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, `key-${index}`)),
      ),
    );
    expect(mostAtOnce(gateway.requests, DELAY_MS)).toBe(4);
  });

  it('refuses the user’s and the address’s waiting sends on close', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'answer', delayMs: 200 });
    const client = aClient({ maxInFlightPerUser: 1, maxInFlightPerAddress: 1 });
    const inFlight = client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, 'key-1'), { userId: ALICE });
    const waitingForUser = client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, 'key-2'), { userId: ALICE });
    const waitingForAddress = client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, 'key-3'), { userId: BOB });
    await gateway.waitForRequests(1);
    const closed = client.close();
    await expect(waitingForUser).rejects.toBeInstanceOf(GatewayClientClosedError);
    await expect(waitingForAddress).rejects.toBeInstanceOf(GatewayClientClosedError);
    expect(await inFlight).toMatchObject({ status: 200 });
    await closed;
    expect(client.keysHeld).toEqual({ users: 0, origins: 0, addresses: 0 });
  });
});
