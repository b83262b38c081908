import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { localEnv } from '../global-setup.js';

const run = promisify(execFile);
const SCRIPT = new URL('../../../scripts/services.sh', import.meta.url).pathname;

export type ServiceCommand = 'stop-rabbitmq' | 'start-rabbitmq' | 'stop-mongo' | 'start-mongo' | 'add-amqp-user';

/** Runs `scripts/services.sh <command>` against the local services. */
export async function services(command: ServiceCommand, ...args: string[]): Promise<void> {
  await run(SCRIPT, [command, ...args], { env: localEnv(), timeout: 120_000 });
}
