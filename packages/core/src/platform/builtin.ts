/**
 * `process.getBuiltinModule` where the runtime has it (Node ≥ 20.16, Bun, Deno), else
 * `null`. Core reaches Node's modules only through it, never by a static import, so a
 * bundle for another runtime (a Worker, a browser) never pulls them in.
 */
export function builtinModules(): ((id: string) => unknown) | null {
  const process = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } })
    .process;
  return typeof process?.getBuiltinModule === 'function'
    ? process.getBuiltinModule.bind(process)
    : null;
}
