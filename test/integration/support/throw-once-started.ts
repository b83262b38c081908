/**
 * Preloaded with `--import` into a process entry point: once the entry has
 * installed its signal handlers (it is running), throws the way a bug
 * nobody foresaw would. `THROW_KIND`: `exception` (uncaught) or `rejection`
 * (unhandled).
 */
const kind = process.env['THROW_KIND'] ?? 'exception';
const poll = setInterval(() => {
  if (process.listenerCount('SIGTERM') === 0) return;
  clearInterval(poll);
  if (kind === 'rejection') void Promise.reject(new Error('injected rejection'));
  else throw new Error('injected exception');
}, 10);
