import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * A certificate authority made for one test run, and a server certificate
 * it issued for 127.0.0.1 and localhost: what the push gateway double serves
 * HTTPS with. Pusher URLs are https and certificates are always verified,
 * so a process that must reach the double trusts this CA the standard way,
 * with `NODE_EXTRA_CA_CERTS=<caCertFile>` in its environment (Node reads it
 * once, at start), and a test's own client with `ca: caCert`.
 *
 * Made with the `openssl` command: Node's crypto can make keys but cannot
 * issue a certificate.
 */
export interface ThrowawayCa {
  /** The temporary folder holding the files below; `remove` deletes it. */
  readonly dir: string;
  /** The CA certificate (PEM) as a file, for NODE_EXTRA_CA_CERTS. */
  readonly caCertFile: string;
  /** The CA certificate (PEM). */
  readonly caCert: string;
  /** The server's private key (PEM). */
  readonly serverKey: string;
  /** The server certificate (PEM), for IP:127.0.0.1 and DNS:localhost. */
  readonly serverCert: string;
  remove: () => Promise<void>;
}

const run = promisify(execFile);

/** The subject and extensions of the CA: it may sign server certificates and nothing below them. */
const CA_CONFIG = `[req]
prompt = no
distinguished_name = subject
x509_extensions = ca
[subject]
CN = matrix-push-worker throwaway test CA
[ca]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
`;

/** The server's subject, and the extensions the CA gives its certificate: TLS server for the loopback names only. */
const SERVER_CONFIG = `[req]
prompt = no
distinguished_name = subject
[subject]
CN = localhost
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
`;

/** P-256 keys: quick to make, accepted everywhere. */
const NEW_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/**
 * Why no throwaway CA can be made on this machine (a sentence to skip a
 * test with), or `undefined` when the `openssl` command is there.
 */
export function throwawayCaUnavailable(): string | undefined {
  const probe = spawnSync('openssl', ['version'], { encoding: 'utf8' });
  if (probe.error === undefined && probe.status === 0) return undefined;
  return 'the openssl command is not on PATH: it makes the throwaway CA the HTTPS tests need (Node cannot issue certificates)';
}

/**
 * A new CA and server certificate in a new temporary folder, valid for two
 * days. The CA's private key is deleted as soon as it has signed: nothing
 * else can ever be issued under the CA a test process trusts.
 */
export async function makeThrowawayCa(): Promise<ThrowawayCa> {
  const dir = await mkdtemp(join(tmpdir(), 'push-gateway-ca-'));
  const file = (name: string): string => join(dir, name);
  const keyAndOut = (name: string, out: string): string[] => [
    '-keyout',
    file(`${name}.key`),
    '-out',
    file(`${name}.${out}`),
  ];
  try {
    await writeFile(file('ca.cnf'), CA_CONFIG);
    await writeFile(file('server.cnf'), SERVER_CONFIG);
    const days = ['-days', '2'];
    // The CA signs itself; the server's key comes with a request the CA then signs.
    await run('openssl', ['req', '-x509', ...NEW_KEY, ...days, '-config', file('ca.cnf'), ...keyAndOut('ca', 'pem')]);
    await run('openssl', ['req', '-new', ...NEW_KEY, '-config', file('server.cnf'), ...keyAndOut('server', 'csr')]);
    await run('openssl', [
      'x509',
      '-req',
      '-in',
      file('server.csr'),
      '-CA',
      file('ca.pem'),
      '-CAkey',
      file('ca.key'),
      '-set_serial',
      `0x${randomBytes(8).toString('hex')}`,
      ...days,
      '-extfile',
      file('server.cnf'),
      '-extensions',
      'server',
      '-out',
      file('server.pem'),
    ]);
    await rm(file('ca.key'));
    const [caCert, serverKey, serverCert] = await Promise.all(
      ['ca.pem', 'server.key', 'server.pem'].map(async (name) => readFile(file(name), 'utf8')),
    );
    return {
      dir,
      caCertFile: file('ca.pem'),
      caCert: caCert ?? '',
      serverKey: serverKey ?? '',
      serverCert: serverCert ?? '',
      remove: async () => rm(dir, { recursive: true, force: true }),
    };
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}
