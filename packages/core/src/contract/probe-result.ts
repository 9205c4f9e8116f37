/* What a connection probe answers (docs/api.md §8): its steps, never a token. */

/** One step of a probe. */
export interface ProbeStep {
  step: 'discover' | 'initialize' | 'initialized' | 'tools/list' | 'close';
  status: number | null;
  ok: boolean;
  note: string;
}

/**
 * What `POST /api/oauth/probe/<connection>` answers: never the token.
 *
 * @see [docs/api.md §8](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#8-connection-probe)
 */
export interface ProbeResult {
  ok: boolean;
  server: { name: string; version: string; protocol_version: string } | null;
  tools: { name: string; description: string }[];
  steps: ProbeStep[];
}
