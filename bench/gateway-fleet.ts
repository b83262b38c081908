/**
 * Push gateway doubles for the delivery part of `npm run bench`, in a
 * process of their own: `count` doubles (argv[2]) on 127.0.0.1, each on a
 * port of its own (several ports: several gateways), with the light
 * recording. They run apart from the benchmark process so that answering
 * tens of thousands of requests takes nothing from the event loop that
 * times the worker's other queues (the isolation scenario), as real
 * gateways would not. Driven over IPC by bench/support/gateway-fleet.ts.
 */
import { PushGatewayDouble } from '../test/support/push-gateway-double.js';
import type { FleetCommand, FleetReply } from './support/gateway-fleet.js';

const count = Number(process.argv[2] ?? 4);
const doubles = await Promise.all(
  Array.from({ length: count }, async () => PushGatewayDouble.start({ recording: 'light' })),
);
const send = (reply: FleetReply): void => {
  process.send?.(reply);
};

function run(command: FleetCommand): unknown {
  const targets = command.index === undefined ? doubles : [doubles[command.index]];
  switch (command.cmd) {
    case 'behave':
      for (const double of targets) double?.behave(command.behaviour);
      return null;
    case 'restore':
      for (const double of targets) double?.restore();
      return null;
    case 'clear':
      for (const double of targets) double?.clearRequests();
      return null;
    case 'stats':
      return doubles.map((double) => ({ ...double.stats, connections: double.connections }));
    case 'deviceLog':
      return Object.fromEntries(targets.flatMap((double) => [...(double?.deviceLog ?? new Map())]));
  }
}

process.on('message', (command: FleetCommand) => {
  send({ id: command.id, result: run(command) });
});
process.on('disconnect', () => {
  void Promise.all(doubles.map(async (double) => double.close())).finally(() => process.exit(0));
});
send({ ready: doubles.map((double) => double.notifyUrl) });
