import type { Principal } from '../auth/principal.js';
import { KeywayError } from '../contract/errors.js';
import type { ProviderState } from '../storage/states.js';
import { type AssertionSource, sourceServes } from './assertion-sources.js';
import type { ProviderSpec } from './input.js';

/*
 * What only the root key may do to a provider, beyond what any principal covering it may:
 * a provider manager is trusted with the provider, not with the operator's decisions about
 * where tokens and workload identities may go.
 */

function refused(path: string, message: string): KeywayError {
  return new KeywayError('insufficient_scope', message, { details: [{ path, message }] });
}

/**
 * Checks a provider write against what only the root key may do, once the principal may
 * write the provider at all: a broker token never turns hand-outs back on for an inject-only
 * provider (its connections' tokens would leave the broker), and names an assertion source
 * only where the operator bound that source to the provider's id (a workload's JWT would go
 * to a server of its choosing). The spec comes back with the writer recorded on its
 * assertion: a source with no binding serves providers the root key wrote.
 *
 * @throws {KeywayError} `insufficient_scope` naming the field.
 */
export function rootOnly(
  principal: Principal,
  providerId: string,
  spec: ProviderSpec,
  previous: ProviderState | null,
  sources: Readonly<Record<string, AssertionSource>>,
): ProviderSpec {
  const root = principal.kind === 'root';
  if (!root && spec.handOut && previous !== null && previous.hand_out === false) {
    throw refused(
      'hand_out',
      `provider ${JSON.stringify(providerId)} is inject-only: only the root key may let it hand out tokens (send ` +
        `"hand_out": false to keep it so)`,
    );
  }
  const assertion = spec.assertion;
  if (assertion === undefined) return spec;
  if (!root && !sourceServes(sources[assertion.source], providerId)) {
    throw refused(
      'credentials.assertion_source',
      `the assertion source ${JSON.stringify(assertion.source)} is not bound to provider ` +
        `${JSON.stringify(providerId)}: the operator lists the providers each source serves ` +
        `(KEYWAY_ASSERTION_SOURCES), and only the root key may use a source for others`,
    );
  }
  return { ...spec, assertion: { ...assertion, ...(root ? { root: true } : {}) } };
}
