#!/usr/bin/env node
// Writes a package's TypeScript declarations into its `dist/`, one `.d.ts` per source file,
// with the TypeScript compiler itself. Run from the package folder after tsup, which builds
// the JavaScript; KEYWAY_BUILD_DTS=0 skips it (`pnpm start` needs no declarations).
//
// Workspace packages are resolved as users resolve them, through their built `dist/`
// declarations (no `@keyway/source` condition), so each package's declarations stand alone.
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

if (process.env.KEYWAY_BUILD_DTS === '0') process.exit(0);
const root = fileURLToPath(new URL('..', import.meta.url));
const pkg = process.cwd();
// Beside the package's own tsconfig (whose `types` it keeps), so types resolve from there.
const own = JSON.parse(readFileSync(join(pkg, 'tsconfig.json'), 'utf8'));
const config = join(pkg, '.tsconfig.declarations.json');
writeFileSync(
  config,
  JSON.stringify({
    extends: join(root, 'tsconfig.build.json'),
    compilerOptions: {
      rootDir: resolve(pkg, 'src'),
      outDir: resolve(pkg, 'dist'),
      declaration: true,
      emitDeclarationOnly: true,
      composite: false,
      incremental: false,
      customConditions: [],
      noEmit: false,
      types: own.compilerOptions?.types ?? [],
    },
    include: [resolve(pkg, 'src')],
  }),
);
const tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
try {
  execFileSync(process.execPath, [tsc, '-p', config], { stdio: 'inherit', cwd: pkg });
} finally {
  rmSync(config, { force: true });
}
