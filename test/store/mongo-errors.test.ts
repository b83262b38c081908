import { MongoError, MongoNetworkError, MongoServerError } from 'mongodb';
import { describe, expect, it } from 'vitest';
import { classifyMongoError, isDuplicateKey, isRetryableRead } from '../../src/store/mongo-errors.js';
import { StoreUnavailableError } from '../../src/store/push-store.js';

describe('MongoDB error classification', () => {
  it.each<[string, Error]>([
    ['a network error', new MongoNetworkError('connection reset')],
    ['a primary stepping down', new MongoServerError({ code: 189, errmsg: 'stepped down' })],
    ['a shutdown in progress', new MongoServerError({ code: 91, errmsg: 'shutting down' })],
    ['a socket ended under a write (Node EPIPE, unwrapped)', Object.assign(new Error('This socket has been ended by the other party'), { code: 'EPIPE' })],
    ['a reset socket as the cause', new Error('write failed', { cause: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }) })],
  ])('%s is transient', (_case, error) => {
    const classified = classifyMongoError(error);
    expect(classified).toBeInstanceOf(StoreUnavailableError);
    expect((classified as Error).cause).toBe(error);
  });

  it.each([
    ['a duplicate key', new MongoServerError({ code: 11000, errmsg: 'E11000' })],
    ['a validation failure', new MongoServerError({ code: 121, errmsg: 'invalid' })],
    ['a plain error', new Error('bug')],
  ])('%s is not', (_case, error) => {
    expect(classifyMongoError(error)).toBe(error);
  });

  it('recognises duplicate keys', () => {
    expect(isDuplicateKey(new MongoServerError({ code: 11000, errmsg: 'E11000' }))).toBe(true);
    expect(isDuplicateKey(new MongoError('other'))).toBe(false);
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
