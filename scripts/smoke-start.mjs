#!/usr/bin/env node
// Proves the README's start command on this machine: runs it, waits for the broker, mints a
// token with the printed root key, reads it back with that token, and stops the broker.
import { spawn } from 'node:child_process';

const command = process.argv[2] ?? 'npx -y pnpm@10.34.9 start';
const port = 18000 + Math.floor(Math.random() * 2000);
const name = `smoke-${Date.now()}-${port}`;
const child = spawn('sh', ['-c', command], {
  env: { ...process.env, PORT: String(port), KEYWAY_ROOT_KEY: '' },
  detached: true,
  stdio: ['ignore', 'pipe', 'inherit'],
});

let output = '';
let started = false;
const fail = (message) => {
  console.error(`smoke-start: ${message}\n${output}`);
  stop(1);
};
const stop = (code) => {
  try {
    process.kill(-child.pid, 'SIGTERM');
  } catch {}
  process.exit(code);
};
const timer = setTimeout(() => fail('the broker did not start within 180 s'), 180_000);

child.stdout.setEncoding('utf8');
child.stdout.on('data', async (chunk) => {
  output += chunk;
  const key = output.match(/KEYWAY_ROOT_KEY=(\S+)/)?.[1];
  if (started || !output.includes('listening on') || key === undefined) return;
  started = true;
  clearTimeout(timer);
  try {
    const base = `http://127.0.0.1:${port}`;
    const minted = await fetch(`${base}/api/admin/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      // A fresh name each run: a second run within the hour on the same database (a warm
      // machine) must not meet the live token of the first.
      body: JSON.stringify({ name, scopes: ['smoke'] }),
    });
    if (minted.status !== 201) return fail(`mint answered ${minted.status}`);
    const { access_token } = await minted.json();
    const read = await fetch(`${base}/api/admin/tokens/${name}`, {
      headers: { authorization: `Bearer ${access_token}` },
    });
    if (read.status !== 200) return fail(`read answered ${read.status}`);
    console.log(`smoke-start: "${command}" served a broker on port ${port}: mint 201, read 200`);
    stop(0);
  } catch (error) {
    fail(String(error));
  }
});
child.on('exit', (code) => fail(`the start command exited early with code ${code}`));
