import { z } from 'zod';

/*
 * The portal's limits (docs/api.md §18): how long a list waits for its slowest server, how
 * long lists and idle sessions are kept, how much one portal may hold.
 */

export const PortalSchema = z.strictObject({
  /** How long a list waits for the servers of a portal, ms (default 5000). */
  listDeadlineMs: z.number().int().min(100).max(60_000).optional(),
  /** How long a server's list is served without asking again, ms (default 300000). */
  listCacheMs: z.number().int().min(0).max(86_400_000).optional(),
  /** A client's session closes after this long without a request, ms (default 1800000). */
  sessionIdleMs: z.number().int().min(1000).max(86_400_000).optional(),
  /** The most sessions open at once, over every portal (default 10000). */
  maxSessions: z.number().int().min(1).max(1_000_000).optional(),
  /** The most connections one portal gathers (default 100). */
  maxConnections: z.number().int().min(1).max(1000).optional(),
  /** The most tools, prompts or resources one server's list may hold (default 1000). */
  maxListItems: z.number().int().min(1).max(100_000).optional(),
  /** Record a `tool.called` event for every call (default false). */
  auditToolCalls: z.boolean().optional(),
});

export type PortalOptions = z.infer<typeof PortalSchema>;

export interface PortalSettings {
  listDeadlineMs: number;
  listCacheMs: number;
  sessionIdleMs: number;
  maxSessions: number;
  maxConnections: number;
  maxListItems: number;
  auditToolCalls: boolean;
}

/** The settings with their defaults. */
export function portalSettings(options: PortalOptions = {}): PortalSettings {
  return {
    listDeadlineMs: options.listDeadlineMs ?? 5000,
    listCacheMs: options.listCacheMs ?? 300_000,
    sessionIdleMs: options.sessionIdleMs ?? 1_800_000,
    maxSessions: options.maxSessions ?? 10_000,
    maxConnections: options.maxConnections ?? 100,
    maxListItems: options.maxListItems ?? 1000,
    auditToolCalls: options.auditToolCalls ?? false,
  };
}
