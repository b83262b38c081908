import { execFileSync } from 'node:child_process';
import type { TestProject } from 'vitest/node';
import '../integration/global-setup.js';

/**
 * The fault tests stop and start RabbitMQ and the MongoDB stand-in, so they
 * need services this machine controls: always the local ones of
 * `scripts/services.sh` on 127.0.0.1, whatever AMQP_URL / MONGODB_URL say.
 */
export default function setup(project: TestProject): void {
  execFileSync(new URL('../../scripts/services.sh', import.meta.url).pathname, ['up'], {
    stdio: 'inherit',
    env: localEnv(),
  });
  project.provide('amqpUrl', 'amqp://guest:guest@127.0.0.1:5672');
  project.provide('mongoUrl', 'mongodb://127.0.0.1:27017');
}

export function localEnv(): NodeJS.ProcessEnv {
  const { AMQP_URL: _amqp, MONGODB_URL: _mongo, ...env } = process.env;
  return env;
}
