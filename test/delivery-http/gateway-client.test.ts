import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { classifyExchange, type GatewayExchange } from '../../src/delivery/response-outcome.js';
import { GatewayClient, GatewayClientClosedError } from '../../src/delivery-http/gateway-client.js';
import { aClient, aGateway, notifyBody, servers, useGatewayClientWorld } from '../support/gateway-client-world.js';

// How many requests are in flight at once, and what is connected to (addresses,
// names, TLS), are in gateway-client-in-flight.test.ts and
// gateway-client-addresses.test.ts.

useGatewayClientWorld();

/** A JSON body of exactly `bytes` bytes (ASCII), rejecting key-1. */
function bodyOfSize(bytes: number): string {
  const shell = '{"rejected":["key-1"],"padding":""}';
  return shell.replace('""', `"${'x'.repeat(bytes - shell.length)}"`);
}

describe('a request to the gateway double', () => {
  it('POSTs the body as JSON to the pusher URL, exactly as built, and reads the answer', async () => {
    const gateway = await aGateway();
    const body = notifyBody(gateway.notifyUrl, 'key-1', 'key-2');
    const exchange = await aClient().send(gateway.notifyUrl, body);
    expect(exchange).toEqual({ kind: 'response', status: 200, body: '{"rejected":[]}' });
    expect(classifyExchange(exchange, Date.now())).toEqual({ kind: 'delivered', status: 200, rejected: [] });
    expect(gateway.requests).toHaveLength(1);
    const [recorded] = gateway.requests;
    expect(recorded).toMatchObject({
      method: 'POST',
      path: '/_matrix/push/v1/notify',
      pushkeys: ['key-1', 'key-2'],
      answer: 200,
    });
    expect(recorded?.rawBody).toBe(JSON.stringify(body));
    expect(recorded?.body).toEqual(body);
    expect(recorded?.headers['content-type']).toBe('application/json');
  });

  it('keeps the query of the pusher URL', async () => {
    const gateway = await aGateway();
    const url = `${gateway.notifyUrl}?app=1`;
    await aClient().send(url, notifyBody(url));
    expect(gateway.requests[0]?.path).toBe('/_matrix/push/v1/notify?app=1');
  });

  it('brings back the pushkeys the gateway rejects', async () => {
    const gateway = await aGateway();
    gateway.reject('key-2');
    const exchange = await aClient().send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, 'key-1', 'key-2', 'key-3'));
    expect(exchange).toEqual({ kind: 'response', status: 200, body: '{"rejected":["key-2"]}' });
    expect(classifyExchange(exchange, Date.now())).toEqual({ kind: 'delivered', status: 200, rejected: ['key-2'] });
  });

  it.each<[string, number, number | undefined, string | undefined]>([
    ['503 with Retry-After in seconds', 503, 120, '120'],
    ['429 with Retry-After in seconds', 429, 30, '30'],
    ['500 without Retry-After', 500, undefined, undefined],
  ])('%s: status and header as sent', async (_, status, retryAfter, header) => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'status', status, ...(retryAfter === undefined ? {} : { retryAfter }) });
    const exchange = await aClient().send(gateway.notifyUrl, notifyBody(gateway.notifyUrl));
    expect(exchange).toMatchObject({ kind: 'response', status });
    if (header === undefined) expect(exchange).not.toHaveProperty('retryAfter');
    else expect(exchange).toHaveProperty('retryAfter', header);
    expect(classifyExchange(exchange, Date.now())).toMatchObject({
      kind: 'retry',
      status,
      ...(retryAfter === undefined ? {} : { retryAfterMs: retryAfter * 1000 }),
    });
  });

  it('brings back a Retry-After HTTP-date as sent', async () => {
    const gateway = await aGateway();
    const later = new Date(Math.ceil(Date.now() / 1000) * 1000 + 90_000);
    gateway.behave({ kind: 'status', status: 429, retryAfter: later });
    const exchange = await aClient().send(gateway.notifyUrl, notifyBody(gateway.notifyUrl));
    expect(exchange).toMatchObject({ kind: 'response', status: 429, retryAfter: later.toUTCString() });
  });

  it.each([301, 302, 303, 307, 308])('does not follow a %i redirect', async (status) => {
    const gateway = await aGateway();
    const elsewhere = await aGateway();
    gateway.behave({ kind: 'redirect', status, location: elsewhere.notifyUrl });
    const exchange = await aClient().send(gateway.notifyUrl, notifyBody(gateway.notifyUrl));
    expect(exchange).toMatchObject({ kind: 'response', status });
    expect(classifyExchange(exchange, Date.now())).toEqual({ kind: 'failed', cause: 'redirect', status });
    expect(gateway.requests).toHaveLength(1);
    expect(elsewhere.requests).toHaveLength(0);
    expect(elsewhere.connections).toBe(0);
  });

  it('gives up on a gateway that never answers after the headers timeout', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'hang' });
    const started = performance.now();
    const exchange = await aClient({ headersTimeoutMs: 300 }).send(gateway.notifyUrl, notifyBody(gateway.notifyUrl));
    const tookMs = performance.now() - started;
    expect(exchange).toEqual({ kind: 'timeout', phase: 'headers' });
    expect(gateway.requests).toHaveLength(1);
    expect(tookMs).toBeGreaterThanOrEqual(290);
    expect(tookMs).toBeLessThan(3_000);
    expect(classifyExchange(exchange, Date.now())).toEqual({ kind: 'retry', cause: 'timeout' });
  });

  it('says a reset connection is a connection error, and connects anew for the next request', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'reset' }, { times: 1 });
    const client = aClient();
    const exchange = await client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl));
    expect(exchange).toEqual({ kind: 'connection-error', reason: expect.any(String) as unknown });
    expect(classifyExchange(exchange, Date.now())).toEqual({ kind: 'retry', cause: 'connection-error' });
    expect(await client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).toMatchObject({ status: 200 });
    expect(gateway.requests.map((request) => request.answer)).toEqual(['reset', 200]);
  });

  it('says a refused connection is a connection error, without throwing', async () => {
    const gateway = await aGateway();
    await gateway.down();
    expect(await aClient().send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).toEqual({
      kind: 'connection-error',
      reason: 'ECONNREFUSED',
    });
  });

  it.each<[string, number, Partial<GatewayExchange>]>([
    ['exactly 64 KiB is read whole', 64 * 1024, { body: bodyOfSize(64 * 1024) }],
    ['one byte more is dropped whole', 64 * 1024 + 1, { bodyDropped: 'too-large' }],
  ])('a 200 body of %s', async (_, bytes, read) => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'status', status: 200, body: bodyOfSize(bytes) });
    const exchange = await aClient().send(gateway.notifyUrl, notifyBody(gateway.notifyUrl));
    expect(exchange).toEqual({ kind: 'response', status: 200, ...read });
    // Only a body read whole may remove pushers: the dropped one is delivered, nothing rejected.
    const rejected = 'body' in read ? ['key-1'] : [];
    expect(classifyExchange(exchange, Date.now())).toEqual({ kind: 'delivered', status: 200, rejected });
  });

  it.each<[string, number]>([
    ['a short one', 1024],
    ['one far over the cap', 4 * 1024 * 1024],
  ])('discards the body of a 503, %s: status and Retry-After only, nothing kept', async (_, bytes) => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'status', status: 503, retryAfter: 120, body: bodyOfSize(bytes) });
    const client = aClient();
    const exchange = await client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl));
    expect(exchange).toEqual({ kind: 'response', status: 503, retryAfter: '120' });
    expect(classifyExchange(exchange, Date.now())).toMatchObject({ kind: 'retry', retryAfterMs: 120_000 });
  });

  it('reuses the connection after discarding a short error body (read to its end, not cut off)', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'status', status: 500, body: bodyOfSize(1024) }, { times: 1 });
    const client = aClient();
    expect(await client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).toEqual({
      kind: 'response',
      status: 500,
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).toMatchObject({ status: 200 });
    expect(gateway.connections).toBe(1);
  });

  it('keeps the status of an answer whose body stalls, and drops the body after the body timeout', async () => {
    // A gateway that sends its headers and part of its body, then nothing: the double cannot, node:http can.
    const stalling = createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        response.writeHead(200, { 'Content-Type': 'application/json' });
        response.write('{"rejected":["key-1"');
      });
    });
    servers.push(stalling);
    await new Promise<void>((resolve) => stalling.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(stalling.address() as AddressInfo).port}/_matrix/push/v1/notify`;
    const exchange = await aClient({ bodyTimeoutMs: 200 }).send(url, notifyBody(url));
    expect(exchange).toEqual({ kind: 'response', status: 200, bodyDropped: 'timeout' });
    expect(classifyExchange(exchange, Date.now())).toEqual({ kind: 'delivered', status: 200, rejected: [] });
  });

  it('reuses one keep-alive connection for requests one after another', async () => {
    const gateway = await aGateway();
    const client = aClient();
    for (let request = 0; request < 3; request += 1) {
      expect(await client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).toMatchObject({ status: 200 });
      // undici frees a connection one event-loop turn after its response (so that a server closing it
      // anyway is noticed first): a request sent within that turn would open a second one, below the cap.
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(gateway.requests).toHaveLength(3);
    expect(gateway.connections).toBe(1);
  });

  it('sends back-to-back requests on one connection when that is the origin’s cap', async () => {
    const gateway = await aGateway();
    const client = aClient({ maxInFlightPerOrigin: 1 });
    for (let request = 0; request < 5; request += 1) {
      expect(await client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).toMatchObject({ status: 200 });
    }
    expect(gateway.connections).toBe(1);
  });
});

describe('closing', () => {
  it('refuses sends waiting for a slot, lets the one in flight finish, and closes once however often asked', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'answer', delayMs: 200 });
    const client = aClient({ maxInFlightPerOrigin: 1 });
    const inFlight = client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, 'key-1'));
    const waiting = client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, 'key-2'));
    await gateway.waitForRequests(1);
    const closed = [client.close(), client.close()];
    await expect(waiting).rejects.toBeInstanceOf(GatewayClientClosedError);
    expect(await inFlight).toMatchObject({ kind: 'response', status: 200 });
    await Promise.all(closed);
    await client.close();
    await expect(client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).rejects.toBeInstanceOf(
      GatewayClientClosedError,
    );
    expect(gateway.requests.map((request) => request.pushkeys)).toEqual([['key-1']]);
  });

  it.each([
    { name: 'alone', closeFirst: false },
    { name: 'while a close waits for them', closeFirst: true },
  ])('destroy ($name) aborts the requests a silent gateway holds: each a connection error', async ({ closeFirst }) => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'hold' });
    const client = aClient();
    const inFlight = [1, 2].map(async (n) =>
      client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, `key-${String(n)}`)),
    );
    await gateway.waitForRequests(2);
    const closing = closeFirst ? client.close() : undefined;
    await client.destroy();
    expect(await Promise.all(inFlight)).toEqual([1, 2].map(() => ({ kind: 'connection-error', reason: 'AbortError' })));
    await closing;
    await expect(client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).rejects.toBeInstanceOf(
      GatewayClientClosedError,
    );
  });

  it('refuses settings that are not whole numbers ≥ 1 at construction', () => {
    expect(() => new GatewayClient({ maxInFlight: 0 })).toThrow(RangeError);
    expect(() => new GatewayClient({ maxInFlightPerOrigin: 1.5 })).toThrow(/maxInFlightPerOrigin/);
    expect(() => new GatewayClient({ headersTimeoutMs: -1 })).toThrow(/headersTimeoutMs/);
    expect(() => new GatewayClient({ maxInFlightPerAddress: 0 })).toThrow(/maxInFlightPerAddress/);
    expect(() => new GatewayClient({ maxInFlightPerUser: 1.5 })).toThrow(/maxInFlightPerUser/);
  });
});
