import { existsSync, readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ENVIRONMENT } from '../../src/config/worker-environment.js';
import { loadConfig } from '../../src/config/load-config.js';
import { GATEWAY_ENVIRONMENT, loadGatewayConfig } from '../../src/gateway/gateway-config.js';
import {
  LOCAL_GATEWAY_ENVIRONMENT,
  localGatewaySettings,
} from '../../src/local-push-gateway/local-gateway-settings.js';

/**
 * docker-compose.yml, checked without a Docker engine: every variable a
 * service of ours is given is one its configuration reads, and the values
 * load; every file it mounts exists; every published port is on 127.0.0.1
 * only; data lives in named volumes; Prometheus loads the shipped rules and
 * Grafana the shipped dashboard.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface Service {
  readonly image?: string;
  readonly build?: { readonly context: string; readonly target: string };
  readonly ports?: readonly string[];
  readonly volumes?: readonly string[];
  readonly environment?: Readonly<Record<string, string>>;
}
interface Compose {
  readonly services: Readonly<Record<string, Service>>;
  readonly volumes?: Readonly<Record<string, unknown>>;
  readonly networks?: { readonly default?: { readonly ipam?: { readonly config?: readonly { subnet: string }[] } } };
}

const compose = parse(readFileSync(`${ROOT}docker-compose.yml`, 'utf8')) as Compose;
const services = Object.entries(compose.services);
const service = (name: string): Service => {
  const found = compose.services[name];
  if (found === undefined) throw new Error(`docker-compose.yml has no service ${name}`);
  return found;
};

/** The variables each of our images reads, by its Dockerfile target. */
const VARIABLES: Record<string, readonly string[]> = {
  worker: ENVIRONMENT.map((variable) => variable.name),
  gateway: GATEWAY_ENVIRONMENT.map((variable) => variable.name),
  'push-gateway': LOCAL_GATEWAY_ENVIRONMENT.map((variable) => variable.name),
};
const ours = services.filter(([, s]) => s.build !== undefined);

/** `host:container[:mode]` for a bind mount or a named volume. */
function mounts(s: Service): { source: string; target: string }[] {
  return (s.volumes ?? []).map((volume) => {
    const [source = '', target = ''] = volume.split(':');
    return { source, target };
  });
}

describe('docker-compose.yml', () => {
  it('builds only targets the Dockerfile has', () => {
    const targets = [...readFileSync(`${ROOT}Dockerfile`, 'utf8').matchAll(/^FROM \S+ AS (\S+)$/gm)].map((m) => m[1]);
    expect(ours.map(([, s]) => s.build?.target)).toEqual(['worker', 'gateway', 'push-gateway']);
    for (const [, s] of ours) expect(targets).toContain(s.build?.target);
  });

  it.each(ours)('gives %s only variables its configuration reads', (_name, s) => {
    const known = VARIABLES[s.build?.target ?? ''] ?? [];
    expect(Object.keys(s.environment ?? {}).filter((name) => !known.includes(name))).toEqual([]);
  });

  it('gives every service of ours values its configuration loads', () => {
    const worker = loadConfig(service('worker').environment);
    expect(worker.amqp.trustedPublishers).toEqual(['guest']);
    expect(worker.pushers.allowInsecureGateways).toBe(true);
    expect(loadGatewayConfig(service('gateway').environment).amqp.publisherUserId).toBe('guest');
    expect(localGatewaySettings(service('push-gateway').environment ?? {})).toMatchObject({
      ok: true,
      settings: { host: '0.0.0.0', port: 8091 },
    });
  });

  it('trusts the broker user the gateway connects as, and lets the workers reach the compose network', () => {
    const env = service('worker').environment ?? {};
    const user = new URL(service('gateway').environment?.['AMQP_URL'] ?? '').username;
    expect(env['TRUSTED_PUBLISHERS']).toBe(user);
    expect(service('gateway').environment?.['AMQP_PUBLISHER_USER_ID']).toBe(user);
    expect(env['PUSH_GATEWAY_IP_ALLOWLIST']).toBe(compose.networks?.default?.ipam?.config?.[0]?.subnet);
  });

  it.each(services)('publishes %s only on 127.0.0.1', (_name, s) => {
    for (const port of s.ports ?? []) expect(port).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
  });

  it.each(services)('mounts into %s only files that exist, and volumes it declares', (_name, s) => {
    for (const { source } of mounts(s)) {
      if (source.startsWith('.') || source.startsWith('/')) {
        expect(existsSync(`${ROOT}${source}`), source).toBe(true);
        expect(statSync(`${ROOT}${source}`).isFile(), source).toBe(true);
      } else {
        expect(Object.keys(compose.volumes ?? {})).toContain(source);
      }
    }
  });

  it('keeps the broker and store data in named volumes', () => {
    expect(mounts(service('rabbitmq'))).toContainEqual({ source: 'rabbitmq-data', target: '/var/lib/rabbitmq' });
    expect(mounts(service('mongodb'))).toContainEqual({ source: 'mongodb-data', target: '/data/db' });
  });

  it('gives Prometheus the shipped alert rules and the job names they expect', () => {
    const targets = mounts(service('prometheus'));
    const config = targets.find((m) => m.target === '/etc/prometheus/prometheus.yml');
    expect(config).toBeDefined();
    const prometheus = parse(readFileSync(`${ROOT}${config?.source ?? ''}`, 'utf8')) as {
      rule_files: string[];
      scrape_configs: { job_name: string }[];
    };
    for (const file of prometheus.rule_files) {
      expect(targets.find((m) => m.target === file)?.source).toBe('./ops/prometheus/alerts.yml');
    }
    expect(prometheus.scrape_configs.map((job) => job.job_name)).toEqual(['matrix-push-worker', 'matrix-push-gateway']);
  });

  it('gives Grafana the shipped dashboard, in the folder its provider reads', () => {
    const targets = mounts(service('grafana'));
    const dashboard = targets.find((m) => m.source === './ops/grafana/matrix-push-worker.json');
    const provider = targets.find((m) => m.target.startsWith('/etc/grafana/provisioning/dashboards/'));
    const providers = parse(readFileSync(`${ROOT}${provider?.source ?? ''}`, 'utf8')) as {
      providers: { options: { path: string } }[];
    };
    expect(dashboard?.target.startsWith(`${providers.providers[0]?.options.path ?? '?'}/`)).toBe(true);
    expect(targets.some((m) => m.target.startsWith('/etc/grafana/provisioning/datasources/'))).toBe(true);
  });
});
