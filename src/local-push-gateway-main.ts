import { LocalPushGateway, NOTIFY_PATH } from './local-push-gateway/local-push-gateway.js';
import { localGatewaySettings } from './local-push-gateway/local-gateway-settings.js';

/**
 * `npm run push-gateway:local`: a Matrix push gateway for development
 * (src/local-push-gateway/local-push-gateway.ts). It prints one line per
 * device notified on stdout, and everything else (where it listens, why it
 * stopped) on stderr. Settings: LOCAL_PUSH_GATEWAY_HOST (127.0.0.1),
 * LOCAL_PUSH_GATEWAY_PORT (8091), LOCAL_PUSH_GATEWAY_REJECT. SIGINT or
 * SIGTERM: stop, exit 0.
 */
const NAME = 'local-push-gateway';
const check = localGatewaySettings(process.env);
if (!check.ok) {
  process.stderr.write(`${NAME}: ${check.error}\n`);
  process.exit(2);
}
const { settings } = check;
const gateway = new LocalPushGateway(settings, (line) => {
  process.stdout.write(`${line}\n`);
});
try {
  const port = await gateway.listen();
  const rejects = [
    'pushkeys starting with reject-',
    ...(settings.reject.size > 0 ? [`${settings.reject.size} listed`] : []),
  ];
  process.stderr.write(
    `${NAME}: listening on http://${settings.host.includes(':') ? `[${settings.host}]` : settings.host}:${port}${NOTIFY_PATH} (recent: /recent; rejects ${rejects.join(' and ')})\n`,
  );
} catch (error) {
  process.stderr.write(`${NAME}: failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void gateway.close().then(() => process.exit(0));
  });
}
