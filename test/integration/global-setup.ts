import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    amqpUrl: string;
    mongoUrl: string;
  }
}

const LOCAL_AMQP = 'amqp://guest:guest@127.0.0.1:5672';
const LOCAL_MONGO = 'mongodb://127.0.0.1:27017';

/**
 * Where the integration tests find RabbitMQ and MongoDB, in this order:
 * 1. `AMQP_URL` / `MONGODB_URL` when set;
 * 2. containers started with testcontainers when a Docker engine answers;
 * 3. otherwise `scripts/services.sh up` (Debian's RabbitMQ and the
 *    mongo-java-server stand-in on this machine).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const stops: (() => Promise<unknown>)[] = [];
  let amqpUrl = process.env['AMQP_URL'];
  let mongoUrl = process.env['MONGODB_URL'];

  if ((amqpUrl === undefined || mongoUrl === undefined) && (await dockerAnswers())) {
    if (amqpUrl === undefined) {
      const { RabbitMQContainer } = await import('@testcontainers/rabbitmq');
      const rabbit = await new RabbitMQContainer('rabbitmq:3.13-management').start();
      stops.push(async () => rabbit.stop());
      amqpUrl = rabbit.getAmqpUrl();
    }
    if (mongoUrl === undefined) {
      const { MongoDBContainer } = await import('@testcontainers/mongodb');
      const mongo = await new MongoDBContainer('mongo:7').start();
      stops.push(async () => mongo.stop());
      const url = mongo.getConnectionString();
      mongoUrl = url.includes('directConnection') ? url : `${url}${url.includes('?') ? '&' : '?'}directConnection=true`;
    }
  }
  if (amqpUrl === undefined || mongoUrl === undefined) {
    const script = new URL('../../scripts/services.sh', import.meta.url).pathname;
    execFileSync(script, ['up'], { stdio: 'inherit', env: process.env });
    amqpUrl ??= LOCAL_AMQP;
    mongoUrl ??= LOCAL_MONGO;
  }

  project.provide('amqpUrl', amqpUrl);
  project.provide('mongoUrl', mongoUrl);
  return async () => {
    for (const stop of stops.reverse()) await stop();
  };
}

async function dockerAnswers(): Promise<boolean> {
  if (process.env['DOCKER_HOST'] === undefined && !existsSync('/var/run/docker.sock')) return false;
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}
