import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { type Browser, chromium, type Page } from 'playwright-core';

/* The real browser of the tests: Debian's Chromium, driven by playwright-core. */

/** The system's Chromium (Debian's package): never a downloaded browser. */
export function chromiumPath(): string {
  return execFileSync('sh', ['-c', 'command -v chromium || command -v chromium-browser'])
    .toString()
    .trim();
}

/** Chromium, headless, as CI runs it (as root, so without its sandbox). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: chromiumPath(), args: ['--headless', '--no-sandbox'] });
}

let axe: string | undefined;

/** axe-core's serious and critical findings on a page as it stands (none expected). */
export async function accessibilityFindings(page: Page): Promise<string[]> {
  axe ??= readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  await page.evaluate(axe);
  const found = await page.evaluate(async () => {
    const run = (window as unknown as { axe: { run: (c: unknown) => Promise<unknown> } }).axe;
    const result = (await run.run(document)) as {
      violations: { id: string; impact: string; nodes: { target: string[] }[] }[];
    };
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      nodes: v.nodes.map((n) => n.target.join(' ')),
    }));
  });
  return found
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.nodes.join(', ')}`);
}
