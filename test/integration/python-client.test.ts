import { describe, it } from 'vitest';
import { expectClientScriptPasses } from './support/client-script.js';
import { pythonMissing } from './support/python-venv.js';

/**
 * The Python client (clients/python) as the suite runs it: scripts/python-client.sh makes its
 * virtualenv, installs it from PyPI with its test extra, and runs ruff, mypy --strict and pytest
 * against a real worker process (its own queues and database) on this run's broker and MongoDB.
 * This file fails when the script does, with its output. Skipped only where Python 3 or its venv
 * module is missing.
 */
const missing = pythonMissing();
if (missing !== undefined) console.warn(`[python client] skipped: ${missing}`);

describe.skipIf(missing !== undefined)('the Python client', () => {
  it('passes ruff, mypy --strict and its pytest suite against a real worker', { timeout: 900_000 }, async () => {
    await expectClientScriptPasses('python-client.sh');
  });
});
