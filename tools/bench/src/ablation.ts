import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { bundleCliEntry } from '@keyway/test-support/processes';
import type { Plugin } from 'esbuild';
import { benchDir } from './processes.js';

/*
 * Builds of `keyway serve` with a part of the gateway's work answered from memory, to weigh
 * that part (`pnpm bench --gateway-shares`). For measurement only: such a build lets a
 * revoked token through and never sees a refreshed connection. The sources are edited as
 * esbuild loads them, so the product's code carries no switch for this; an edit that no
 * longer finds its text fails the build rather than measure the unedited code.
 */

/** A part of the gateway's work that a measuring build answers from memory. */
export type GatewayPart = 'check' | 'read';

interface Edit {
  /** The source file, from the repository's root. */
  file: string;
  /** Text found exactly once in the file, and what replaces it. */
  from: string;
  to: string;
}

/** The repository's root. */
const repo = join(benchDir, '..', '..');

const TOKENS = 'packages/core/src/tokens/service.ts';
const GATEWAY = 'packages/core/src/upstream/gateway.ts';

const EDITS: Record<GatewayPart, Edit[]> = {
  // The token check: each credential's principal, once checked, is answered again.
  check: [
    {
      file: TOKENS,
      from: `    if (credential === null || credential === undefined || credential === '') {`,
      to: `    const kept = ablatedChecks.get(credential ?? '');
    if (kept !== undefined) return kept;
    if (credential === null || credential === undefined || credential === '') {`,
    },
    {
      file: TOKENS,
      from: `      return this.#principalOf(fast.findTokenByIdHashSync(idHash), idHash, audience);`,
      to: `      const checked = this.#principalOf(fast.findTokenByIdHashSync(idHash), idHash, audience);
      ablatedChecks.set(credential, checked);
      return checked;`,
    },
    {
      file: TOKENS,
      from: `\nexport class TokenService`,
      to: `\nconst ablatedChecks = new Map();\nexport class TokenService`,
    },
  ],
  // The connection's read: its record and tokens, once read, are used again.
  read: [
    {
      file: GATEWAY,
      from: `      const usable = usableFor(this.#o, connectionId, false);
      current = usable instanceof Promise ? await usable : usable;`,
      to: `      const usable = ablatedReads.get(connectionId) ?? usableFor(this.#o, connectionId, false);
      current = usable instanceof Promise ? await usable : usable;
      ablatedReads.set(connectionId, current);`,
    },
    {
      file: GATEWAY,
      from: `\nexport class Gateway {`,
      to: `\nconst ablatedReads = new Map();\nexport class Gateway {`,
    },
  ],
};

/** `text` with each edit made, each edit's text found exactly once. */
function edited(text: string, file: string, edits: readonly Edit[]): string {
  let result = text;
  for (const { from, to } of edits) {
    const at = result.indexOf(from);
    if (at === -1 || result.indexOf(from, at + 1) !== -1) {
      throw new Error(
        `${file} no longer holds ${JSON.stringify(from)} exactly once: update tools/bench/src/ablation.ts`,
      );
    }
    result = result.slice(0, at) + to + result.slice(at + from.length);
  }
  return result;
}

/** The esbuild plugin that makes the edits of `parts` as their files are loaded. */
function ablating(parts: readonly GatewayPart[]): Plugin {
  const byFile = new Map<string, Edit[]>();
  for (const edit of parts.flatMap((part) => EDITS[part])) {
    const path = join(repo, edit.file);
    byFile.set(path, [...(byFile.get(path) ?? []), edit]);
  }
  return {
    name: 'keyway-bench-ablation',
    setup(build) {
      build.onLoad({ filter: /\.ts$/ }, (args) => {
        const edits = byFile.get(args.path);
        if (edits === undefined) return undefined;
        byFile.delete(args.path);
        return {
          contents: edited(readFileSync(args.path, 'utf8'), args.path, edits),
          loader: 'ts',
        };
      });
      build.onEnd(() => {
        // A file the build never loaded would leave its part measured unedited.
        if (byFile.size > 0) throw new Error(`never loaded: ${[...byFile.keys()].join(', ')}`);
      });
    },
  };
}

/** A build of `keyway serve` with `parts` answered from memory: the path of its bundle. */
export function bundleAblated(parts: readonly GatewayPart[]): Promise<string> {
  return bundleCliEntry(
    join(repo, 'packages', 'cli', 'src', 'bin.ts'),
    `keyway-without-${parts.join('-')}`,
    [ablating(parts)],
  );
}
