/** The package's version, written in by the build (tsup's `define`; Vitest's in tests). */
declare const __KEYWAY_VERSION__: string | undefined;

/**
 * The version of `@keyway/http` (the packages share one version); `0.0.0-source` where the
 * sources run unbuilt without the define (the Bun and Deno examples of this repository).
 */
export const VERSION: string =
  typeof __KEYWAY_VERSION__ === 'string' ? __KEYWAY_VERSION__ : '0.0.0-source';
