// Module resolution hook: `fs` and `node:fs` resolve to fs-with-glob.mjs, except for that
// module itself, which re-exports the real one.
const shim = new URL('./fs-with-glob.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL !== shim) {
    return { url: shim, shortCircuit: true };
  }
  return next(specifier, context);
}
