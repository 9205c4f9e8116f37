import type { TestProject } from 'vitest/node';
import { startTestPostgres } from './postgres.js';

/** Vitest global setup: one PostgreSQL server per test project that asks for one. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startTestPostgres();
  project.provide('databaseUrl', server.url);
  return () => server.stop();
}
