import { type McpProfile, mcpProfileFor } from '../catalog/mcp-profiles.js';
import { KeywayError } from '../contract/errors.js';
import type { DiscoveryTrace } from '../discovery/trace.js';
import type { OutboundFetch } from '../outbound/fetch.js';
import {
  type ClientProfile,
  customAuthMethod,
  type RegisteredClient,
  registerClient,
} from './registration.js';

/*
 * What will work with an MCP server, in plain words (`keyway doctor`, `POST
 * /api/admin/discover`, the console's connect view): discovery's findings read for an
 * operator — which credentials mode, the callback to register, the `resource` Keyway sends,
 * the known quirks of a matching catalog profile.
 */

/** `POST /api/admin/discover`'s answer: the trace and the {@link DoctorReport}. */
export interface DiscoveryReport extends DiscoveryTrace {
  report: DoctorReport;
}

/** Whether a credentials mode will work: `null` when not tried. */
export interface ModeVerdict {
  works: boolean | null;
  /** How it registers: the client-ID metadata document, or dynamic registration. */
  how: 'metadata_document' | 'dynamic' | 'by_hand' | null;
  note: string;
}

/** The report on a server (docs/api.md §6 `discover`, docs/servers.md). */
export interface DoctorReport {
  /** Some credentials mode will work. */
  ok: boolean;
  /**
   * The mode to use: `register` when it works (or is offered and was not tried), else
   * `custom`; `null` when nothing will.
   */
  recommended: 'register' | 'custom' | null;
  register: ModeVerdict;
  custom: ModeVerdict;
  /** The redirect URI an application registered by hand uses; `null` without a base URL. */
  callback_url: string | null;
  /** The RFC 8707 `resource` Keyway sends: the published one, unchanged. */
  resource: string | null;
  /** A catalog profile of this endpoint. */
  profile: Pick<
    McpProfile,
    'id' | 'label' | 'docs_url' | 'checked' | 'credentials' | 'notes'
  > | null;
  /** Each finding in a sentence, in the order an operator needs them. */
  findings: string[];
}

/** The first error line of a registration that failed, in its own words. */
function refusalOf(error: unknown): string {
  return error instanceof KeywayError ? error.message : 'the registration failed';
}

/**
 * Deletes a client the doctor registered (RFC 7592 §2.3), when the server offers it; the
 * answer is only reported. Its registration access token goes to the origin of the
 * registration endpoint that issued it, and nowhere else.
 */
async function unregister(
  outbound: OutboundFetch,
  client: RegisteredClient,
  endpoint: string,
): Promise<boolean> {
  if (client.registration_client_uri === null || client.registration_access_token === null)
    return false;
  try {
    const uri = new URL(client.registration_client_uri, endpoint).href;
    if (new URL(uri).origin !== new URL(endpoint).origin) return false;
    const answer = await outbound(uri, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${client.registration_access_token}` },
    });
    await answer.body?.cancel();
    return answer.status === 204;
  } catch {
    return false;
  }
}

/** The `register` verdict: documents, dynamic registration tried (and undone) or not. */
async function registerVerdict(
  outbound: OutboundFetch,
  trace: DiscoveryTrace,
  deployment: ClientProfile | null,
  tryRegistration: boolean,
): Promise<ModeVerdict> {
  const server = trace.authorization_server;
  if (!trace.ok || server === null)
    return { works: false, how: null, note: 'discovery failed: nothing can be registered' };
  if (deployment === null)
    return {
      works: null,
      how: null,
      note: 'this deployment has no base URL: it registers nothing',
    };
  const documents =
    server.client_id_metadata_document_supported &&
    new URL(deployment.metadataDocumentUrl).protocol === 'https:';
  if (documents)
    return {
      works: true,
      how: 'metadata_document',
      note: `the server reads client-ID metadata documents: Keyway's is ${deployment.metadataDocumentUrl}`,
    };
  if (server.registration_endpoint === null)
    return {
      works: false,
      how: null,
      note:
        'the server offers neither dynamic registration nor client-ID metadata documents' +
        (server.client_id_metadata_document_supported
          ? ' reachable here (the document URL must be https)'
          : ''),
    };
  if (!tryRegistration)
    return {
      works: null,
      how: 'dynamic',
      note: `the server offers dynamic registration at ${server.registration_endpoint} (not tried)`,
    };
  let client: RegisteredClient;
  try {
    client = await registerClient(outbound, server, deployment);
  } catch (error) {
    return { works: false, how: 'dynamic', note: refusalOf(error) };
  }
  const deleted = await unregister(outbound, client, server.registration_endpoint);
  return {
    works: true,
    how: 'dynamic',
    note:
      `dynamic registration works (a test client, ${client.client_id}, was registered with ` +
      `${client.token_endpoint_auth_method}; ${deleted ? 'deleted again' : 'the server offers no way to delete it'})`,
  };
}

/**
 * The report on a server from its discovery trace; `tryRegistration` registers a test
 * client (deleted again where the server allows, RFC 7592) to learn whether registration
 * works — what `keyway doctor` asks for.
 */
export async function doctorReport(
  outbound: OutboundFetch,
  resourceUrl: string,
  trace: DiscoveryTrace,
  deployment: ClientProfile | null,
  tryRegistration: boolean,
): Promise<DoctorReport> {
  const catalog = mcpProfileFor(resourceUrl);
  const profile =
    catalog === null
      ? null
      : {
          id: catalog.id,
          label: catalog.label,
          docs_url: catalog.docs_url,
          checked: catalog.checked,
          credentials: catalog.credentials,
          notes: catalog.notes,
        };
  const register = await registerVerdict(outbound, trace, deployment, tryRegistration);
  const server = trace.authorization_server;
  const callback = deployment?.redirectUri ?? null;
  const method =
    catalog?.token_endpoint_auth_method ??
    customAuthMethod(server?.token_endpoint_auth_methods_supported ?? null, true);
  const custom: ModeVerdict = trace.ok
    ? {
        works: true,
        how: 'by_hand',
        note:
          `register an application with the server${callback === null ? '' : ` at the redirect URI ${callback}`}` +
          ` and give its client id and secret (credentials.mode "custom"; it authenticates with ${method})`,
      }
    : { works: false, how: null, note: `discovery failed (${trace.error}): fix that first` };
  // Offered and not tried counts for registration: only trying can tell it is refused.
  const registers = register.works === true || (register.works === null && register.how !== null);
  const recommended = !trace.ok ? null : registers ? 'register' : 'custom';
  const resource = trace.resource?.resource ?? null;
  const findings: string[] = [];
  if (!trace.ok) {
    const failed = trace.steps.find((step) => !step.ok);
    findings.push(
      `Discovery failed (${trace.error})${failed === undefined ? '' : ` at ${failed.step}: ${failed.note}`}.`,
    );
  } else {
    findings.push(
      `Authorization server ${server?.issuer}: PKCE S256 ${
        server?.code_challenge_methods_supported?.includes('S256')
          ? 'advertised'
          : 'assumed (configuration.pkce)'
      }${trace.legacy ? '; a 2025-03-26 server without protected-resource metadata' : ''}.`,
    );
    if (resource !== null)
      findings.push(
        `Keyway sends resource=${resource} exactly as the server publishes it` +
          (resource === resourceUrl ? '.' : ` (the MCP endpoint is ${resourceUrl}).`),
      );
    findings.push(
      `Scopes requested: ${trace.scopes.length === 0 ? '(none)' : trace.scopes.join(' ')}.`,
    );
    findings.push(`Register: ${register.note}.`);
    if (recommended === 'custom') findings.push(`Custom: ${custom.note}.`);
  }
  if (profile !== null) {
    findings.push(
      `Catalog profile "${profile.id}" (${profile.label}; facts from ${profile.docs_url}, read ${profile.checked}):`,
    );
    for (const note of profile.notes) findings.push(`  ${note}`);
  }
  findings.push(
    recommended === null
      ? 'Nothing will work until discovery succeeds.'
      : `Use credentials.mode "${recommended}"${profile === null ? '' : ` (or "profile": "${profile.id}")`}.`,
  );
  return {
    ok: recommended !== null,
    recommended,
    register,
    custom,
    callback_url: callback,
    resource,
    profile,
    findings,
  };
}
