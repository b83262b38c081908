import { once } from 'node:events';
import { createRequire } from 'node:module';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import {
  MongoClient,
  MongoError,
  MongoNetworkError,
  MongoNetworkTimeoutError,
  MongoOperationTimeoutError,
  MongoServerError,
} from 'mongodb';
import { describe, expect, it } from 'vitest';
import { classifyMongoError, isDuplicateKey, isRetryableRead } from '../../src/store/mongo-errors.js';
import { StoreFailedError, StoreUnavailableError } from '../../src/store/push-store.js';

describe('MongoDB error classification', () => {
  it.each<[string, Error]>([
    ['a network error', new MongoNetworkError('connection reset')],
    ['a primary stepping down', new MongoServerError({ code: 189, errmsg: 'stepped down' })],
    ['a shutdown in progress', new MongoServerError({ code: 91, errmsg: 'shutting down' })],
    [
      'a socket ended under a write (Node EPIPE, unwrapped)',
      Object.assign(new Error('This socket has been ended by the other party'), { code: 'EPIPE' }),
    ],
    [
      'a reset socket as the cause',
      new Error('write failed', { cause: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }) }),
    ],
  ])('%s is transient', (_case, error) => {
    const classified = classifyMongoError(error);
    expect(classified).toBeInstanceOf(StoreUnavailableError);
    expect((classified as Error).cause).toBe(error);
  });

  it.each([
    ['a duplicate key', new MongoServerError({ code: 11000, errmsg: 'E11000' })],
    ['a validation failure', new MongoServerError({ code: 121, errmsg: 'invalid' })],
    ['a driver error of no known kind', new MongoError('something else')],
  ])('%s is a storage failure for good (StoreFailedError, answered Database)', (_case, error) => {
    const classified = classifyMongoError(error);
    expect(classified).toBeInstanceOf(StoreFailedError);
    expect((classified as Error).message).toBe(`MongoDB failed: ${error.message}`);
    expect((classified as Error).cause).toBe(error);
  });

  it("leaves an error that is not the driver's as it is (a bug, answered Internal)", () => {
    const bug = new TypeError('x is undefined');
    expect(classifyMongoError(bug)).toBe(bug);
  });

  it('recognises duplicate keys, thrown by the driver or wrapped', () => {
    const duplicate = new MongoServerError({ code: 11000, errmsg: 'E11000' });
    expect(isDuplicateKey(duplicate)).toBe(true);
    expect(isDuplicateKey(classifyMongoError(duplicate))).toBe(true);
    expect(isDuplicateKey(new MongoError('other'))).toBe(false);
    expect(isDuplicateKey(classifyMongoError(new MongoServerError({ code: 121, errmsg: 'invalid' })))).toBe(false);
  });
});

/** The driver's pool-checkout timeout: not exported by the package, so taken from where the pool throws it. */
const { WaitQueueTimeoutError } = createRequire(import.meta.url)('mongodb/lib/cmap/errors.js') as {
  WaitQueueTimeoutError: new (message: string, address: string) => MongoError;
};

describe('MongoDB timeouts are Unavailable', () => {
  it.each<[string, Error]>([
    ['a socket silent past socketTimeoutMS', new MongoNetworkTimeoutError('connection 3 to 127.0.0.1:27017 timed out')],
    [
      'a connection not made within connectTimeoutMS',
      new MongoNetworkTimeoutError("Socket 'connect' timed out after 2001ms (connectTimeoutMS: 2000)"),
    ],
    [
      'no pooled connection within waitQueueTimeoutMS',
      new WaitQueueTimeoutError('Timed out while checking out a connection from connection pool', '127.0.0.1:27017'),
    ],
    [
      'a client-side operation timeout (timeoutMS)',
      new MongoOperationTimeoutError('Timed out during connection checkout'),
    ],
    [
      "the server's own maxTimeMS",
      new MongoServerError({ code: 50, codeName: 'MaxTimeMSExpired', errmsg: 'operation exceeded time limit' }),
    ],
  ])('%s', (_case, error) => {
    const classified = classifyMongoError(error);
    expect(classified).toBeInstanceOf(StoreUnavailableError);
    expect((classified as Error).message).toBe(`MongoDB is unavailable: ${error.message}`);
    expect((classified as Error).cause).toBe(error);
  });

  it('the pool checkout timeout is recognised by the name the driver gives it', () => {
    expect(new WaitQueueTimeoutError('x', 'h:1').name).toBe('MongoWaitQueueTimeoutError');
  });

  it('what the driver throws when the server accepts connections and never answers (a paused process)', async () => {
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => sockets.add(socket)).listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const { port } = silent.address() as AddressInfo;
    const client = new MongoClient(`mongodb://127.0.0.1:${port}/?directConnection=true`, {
      serverSelectionTimeoutMS: 300,
      connectTimeoutMS: 200,
    });
    try {
      const error = await client
        .db('x')
        .command({ ping: 1 })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(classifyMongoError(error)).toBeInstanceOf(StoreUnavailableError);
    } finally {
      await client.close();
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });
});

describe('isRetryableRead: the reads the driver would send once more', () => {
  it.each<[string, Error]>([
    ['a network error', new MongoNetworkError('connection reset')],
    ['a primary stepping down', new MongoServerError({ code: 189, errmsg: 'stepped down' })],
    ['majority read concern not available yet', new MongoServerError({ code: 134, errmsg: 'not yet' })],
    ['a legacy not-master message', new MongoServerError({ errmsg: 'not master and slaveOk=false' })],
  ])('%s is retried', (_name, error) => {
    expect(isRetryableRead(error)).toBe(true);
  });

  it.each<[string, Error]>([
    ['a duplicate key', new MongoServerError({ code: 11000, errmsg: 'dup' })],
    ['a plain error', new Error('boom')],
    ['a bad query', new MongoServerError({ code: 2, errmsg: 'bad value' })],
  ])('%s is not', (_name, error) => {
    expect(isRetryableRead(error)).toBe(false);
  });
});
