// `node:fs` plus the one `globSync` form the conformance suite uses: `**/<file name>`
// under `options.cwd`, answering paths relative to it.
import fs from 'node:fs';
import path from 'node:path';

export * from 'node:fs';
export default fs;

export function globSync(pattern, options = {}) {
  const match = /^\*\*\/([^*?[\]{}/]+)$/.exec(pattern);
  if (match === null) throw new Error(`globSync shim: unsupported pattern ${pattern}`);
  const cwd = options.cwd ?? process.cwd();
  return fs
    .readdirSync(cwd, { recursive: true })
    .map(String)
    .filter((entry) => path.basename(entry) === match[1]);
}
