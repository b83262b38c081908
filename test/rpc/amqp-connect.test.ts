import { describe, expect, it } from 'vitest';
import { withHeartbeat } from '../../src/rpc/amqp-connect.js';

describe('withHeartbeat', () => {
  it.each([
    ['amqp://guest:guest@127.0.0.1:5672', 10, 'amqp://guest:guest@127.0.0.1:5672?heartbeat=10'],
    ['amqp://guest:guest@127.0.0.1:5672/', 0, 'amqp://guest:guest@127.0.0.1:5672/?heartbeat=0'],
    ['amqp://u@h/vhost?frameMax=8192', 5, 'amqp://u@h/vhost?frameMax=8192&heartbeat=5'],
    ['amqp://u@h?heartbeat=60', 7, 'amqp://u@h?heartbeat=7'],
    ['amqps://front:p%40ss%2Fw%3Ard@rabbit.example.org:5671/%2F', 15, 'amqps://front:p%40ss%2Fw%3Ard@rabbit.example.org:5671/%2F?heartbeat=15'],
  ])('%s with %i s → %s', (url, seconds, expected) => {
    expect(withHeartbeat(url, seconds)).toBe(expected);
  });

  it('leaves the URL alone when no heartbeat is configured', () => {
    expect(withHeartbeat('amqp://u@h?heartbeat=60', undefined)).toBe('amqp://u@h?heartbeat=60');
  });
});
