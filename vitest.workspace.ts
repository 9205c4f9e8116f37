/**
 * The test projects: every package, example and tool folder with a `test/` directory. Vitest 4
 * no longer reads this file by itself; `vitest.config.ts` imports it as `test.projects`.
 */
export default ['packages/*', 'examples/*', 'tools/*'];
