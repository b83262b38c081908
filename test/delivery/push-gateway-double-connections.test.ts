import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fetchErrorCode, notify, notifyBody, rawNotify } from '../support/gateway-double-requests.js';
import { PushGatewayDouble } from '../support/push-gateway-double.js';
import { makeThrowawayCa, type ThrowawayCa, throwawayCaUnavailable } from '../support/throwaway-ca.js';

describe('push gateway double going down and up', () => {
  let gateway: PushGatewayDouble | undefined;

  afterEach(async () => {
    await gateway?.close();
  });

  it('refuses connections while down, drops the open ones, and comes back on the same port', async () => {
    gateway = await PushGatewayDouble.start();
    const { port, notifyUrl } = gateway;
    gateway.behave({ kind: 'hang' });
    const hanging = fetchErrorCode(notify(notifyUrl));
    await gateway.waitForRequests(1);

    await gateway.down();
    expect(await hanging).toMatch(/^(ECONNRESET|UND_ERR_SOCKET)$/);
    expect(await rawNotify(notifyUrl)).toEqual({ errorCode: 'ECONNREFUSED' });

    gateway.restore();
    await gateway.up();
    expect(gateway.port).toBe(port);
    expect(await rawNotify(notifyUrl)).toEqual({ status: 200, body: '{"rejected":[]}' });
  });

  it('drops answers still delayed when it goes down', async () => {
    gateway = await PushGatewayDouble.start();
    gateway.behave({ kind: 'answer', delayMs: 5_000 });
    const delayed = rawNotify(gateway.notifyUrl);
    await gateway.waitForRequests(1);
    await gateway.close();
    expect(await delayed).toEqual({ errorCode: 'ECONNRESET' });
  });
});

describe('push gateway double over HTTPS with a throwaway CA', () => {
  const unavailable = throwawayCaUnavailable();
  let ca: ThrowawayCa | undefined;
  let gateway: PushGatewayDouble | undefined;

  beforeAll(async () => {
    if (unavailable === undefined) ca = await makeThrowawayCa();
  });
  afterEach(async () => {
    await gateway?.close();
    gateway = undefined;
  });
  afterAll(async () => {
    await ca?.remove();
  });

  /** The CA, or the test is skipped saying why. */
  function caOrSkip(skip: (condition: boolean, note: string) => void): ThrowawayCa {
    skip(ca === undefined, `skipped: ${unavailable ?? 'no throwaway CA'}`);
    return ca as ThrowawayCa;
  }

  it('serves https for 127.0.0.1 and localhost, verified with the CA and refused without it', async ({ skip }) => {
    const { serverKey, serverCert, caCert } = caOrSkip(skip);
    gateway = await PushGatewayDouble.start({ tls: { key: serverKey, cert: serverCert } });
    expect(gateway.notifyUrl).toBe(`https://127.0.0.1:${gateway.port}/_matrix/push/v1/notify`);
    expect(await rawNotify(gateway.notifyUrl, { ca: caCert })).toEqual({ status: 200, body: '{"rejected":[]}' });
    const byName = gateway.notifyUrl.replace('127.0.0.1', 'localhost');
    expect(await rawNotify(byName, { ca: caCert })).toEqual({ status: 200, body: '{"rejected":[]}' });
    expect(await rawNotify(gateway.notifyUrl)).toEqual({ errorCode: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' });
  });

  it('resets a TLS connection too', async ({ skip }) => {
    const { serverKey, serverCert, caCert } = caOrSkip(skip);
    gateway = await PushGatewayDouble.start({ tls: { key: serverKey, cert: serverCert } });
    gateway.behave({ kind: 'reset' });
    expect(await rawNotify(gateway.notifyUrl, { ca: caCert })).toEqual({ errorCode: 'ECONNRESET' });
  });

  it('is trusted by a Node process through NODE_EXTRA_CA_CERTS, and only then', async ({ skip }) => {
    const { serverKey, serverCert, caCertFile } = caOrSkip(skip);
    gateway = await PushGatewayDouble.start({ tls: { key: serverKey, cert: serverCert } });
    // A separate process: Node reads NODE_EXTRA_CA_CERTS once, at start. Its fetch is the undici client.
    const script = `
      const body = JSON.stringify(${JSON.stringify(notifyBody(['key-1']))});
      fetch(process.argv[1], { method: 'POST', headers: { 'Content-Type': 'application/json' }, body })
        .then(async (response) => console.log(response.status, await response.text()))
        .catch((error) => console.log('failed', error.cause?.code))
        .finally(() => process.exit(0));`;
    const run = async (environment: NodeJS.ProcessEnv): Promise<string> => {
      const { stdout } = await promisify(execFile)(process.execPath, ['-e', script, gateway?.notifyUrl ?? ''], {
        env: environment,
      });
      return stdout.trim();
    };
    const { NODE_EXTRA_CA_CERTS: _inherited, ...withoutExtraCa } = process.env;
    expect(await run({ ...withoutExtraCa, NODE_EXTRA_CA_CERTS: caCertFile })).toBe('200 {"rejected":[]}');
    expect(await run(withoutExtraCa)).toBe('failed UNABLE_TO_VERIFY_LEAF_SIGNATURE');
  });
});
