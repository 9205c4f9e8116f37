import { sha256 } from '@noble/hashes/sha2.js';
import { actorOf, assertCoversPath, type Principal } from '../auth/principal.js';
import { parseResourcePath } from '../auth/resource-path.js';
import { canonicalizeScopes, setCoversPath } from '../auth/scope.js';
import { allowedRedirect } from '../connections/authorization.js';
import { connectionView } from '../connections/view.js';
import { KeywayError } from '../contract/errors.js';
import { ConnectSessionBody, ConnectStartBody } from '../contract/schemas.js';
import { isoTime } from '../contract/time.js';
import { parseShape } from '../contract/validation.js';
import { fromBase64Url, timingSafeEqual, toBase64Url, utf8 } from '../platform/bytes.js';
import { providerState } from '../providers/state.js';
import type { ConnectionStatus } from '../storage/contract.js';
import type { ConnectDeps } from './deps.js';
import {
  type ConnectSessionInput,
  type ConnectSessionView,
  type ConnectStartInput,
  type CreatedConnectSession,
  DEFAULT_EXPIRES_IN,
  SESSION_KIND,
  type SessionEntry,
  SessionEntrySchema,
} from './session-shapes.js';

/*
 * Connect sessions (docs/api.md §19): an application's backend asks for a short-lived,
 * revocable session; its secret, in the fragment of the hosted page's URL, lets that page
 * do exactly what it needs — list the offered providers, start authorizations of the
 * namespace's connections to them, read their status, and (when allowed) disconnect them.
 */

/** How a secret starts: `kcs_<session id>.<random>`. */
const PREFIX = 'kcs_';

const UNKNOWN = 'the connect session is unknown, has expired, or was ended';

/** One offered provider, as the page shows it. */
export interface OfferedProvider {
  provider_id: string;
  label: string;
  /** The connection the page starts and reads for it. */
  connection_id: string;
  /** `null`: never connected. */
  status: ConnectionStatus | null;
  /** The account the server said the connection is for; `null` when it said none. */
  account: string | null;
  /** The host of the server's consent page: where the user signs in. */
  signs_in_at: string;
  /** Why the connection is in `error` (the server's words); `null` otherwise. */
  error: { code: string; description: string } | null;
}

/** What the page reads of its session (never a token or a secret). */
export interface ConnectPageView {
  branding: SessionEntry['branding'];
  end_user: { name: string } | null;
  expires_at: string;
  allow_disconnect: boolean;
  /** Where the page sends the user back, or `null` (the page tells its opener). */
  redirect_uri: string | null;
  /**
   * The origins the page may tell its opener (a window of the app that opened it) how a
   * connection ended: `redirect_uri`'s, else those of `KEYWAY_ALLOWED_REDIRECTS`.
   */
  opener_origins: string[];
  providers: OfferedProvider[];
}

function hashOf(secret: string): string {
  return toBase64Url(sha256(utf8(secret)));
}

function viewOf(entry: SessionEntry, now: number): ConnectSessionView {
  return {
    id: entry.id,
    namespace: entry.namespace,
    providers: entry.providers,
    end_user: entry.end_user,
    redirect_uri: entry.redirect_uri,
    verify: entry.verify,
    allow_disconnect: entry.allow_disconnect,
    branding: entry.branding,
    created_by: entry.created_by,
    created_at: isoTime(entry.created_at),
    expires_at: isoTime(entry.expires_at),
    status: entry.revoked_at !== null ? 'revoked' : entry.expires_at <= now ? 'expired' : 'active',
    completed: Object.keys(entry.completed).sort(),
  };
}

/**
 * Connect sessions: `broker.connectSessions`.
 *
 * @see [docs/api.md §19](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#19-connect-sessions-and-the-hosted-connect-page)
 */
export class ConnectSessions {
  readonly #deps: ConnectDeps;

  constructor(deps: ConnectDeps) {
    this.#deps = deps;
  }

  async #read(id: string): Promise<SessionEntry | null> {
    const entry = await this.#deps.storage.getVaultEntry(SESSION_KIND, id);
    if (entry === null) return null;
    return SessionEntrySchema.parse(JSON.parse(await this.#deps.vault().open(entry)));
  }

  async #write(entry: SessionEntry): Promise<void> {
    const sealed = await this.#deps
      .vault()
      .seal({ kind: SESSION_KIND, key: entry.id }, JSON.stringify(entry));
    await this.#deps.storage.putVaultEntry(sealed, this.#deps.now());
  }

  /**
   * Creates a session for the end users of `namespace`; the caller must cover the namespace
   * and every offered provider. The answer's `url` holds the secret, shown this once.
   *
   * @throws {KeywayError} `invalid_request` (the body, or no `baseUrl`), `invalid_path`,
   *   `insufficient_scope`, `not_found` (an offered provider), `invalid_redirect`.
   */
  async create(principal: Principal, input: ConnectSessionInput): Promise<CreatedConnectSession> {
    const deps = this.#deps;
    if (deps.baseUrl === null) {
      throw new KeywayError(
        'invalid_request',
        'connect sessions need the broker’s public address (baseUrl, KEYWAY_BASE_URL): the page is {base}/connect',
      );
    }
    const shape = parseShape(ConnectSessionBody, input);
    const namespace = parseResourcePath(shape.namespace, 'namespace');
    assertCoversPath(principal, namespace);
    let providers: string[] | null = null;
    if (shape.providers !== undefined) {
      providers = [];
      for (const [index, id] of shape.providers.entries()) {
        const provider = parseResourcePath(id, `providers.${index}`);
        assertCoversPath(principal, provider);
        if ((await deps.storage.getProvider(provider)) === null) {
          throw new KeywayError('not_found', `no provider ${JSON.stringify(provider)}`, {
            details: [{ path: `providers.${index}`, message: 'no such provider' }],
          });
        }
        if (!providers.includes(provider)) providers.push(provider);
      }
    }
    const redirect =
      shape.redirect_uri === undefined
        ? null
        : allowedRedirect(shape.redirect_uri, deps.allowedRedirects, 'redirect_uri');
    if (shape.verify === true && redirect === null) {
      const message = '"verify" needs a "redirect_uri": the app confirms each connection there';
      throw new KeywayError('invalid_request', message, {
        details: [{ path: 'redirect_uri', message }],
      });
    }
    const now = deps.now();
    const id = toBase64Url(deps.randomBytes(12));
    const secret = `${PREFIX}${id}.${toBase64Url(deps.randomBytes(32))}`;
    const entry: SessionEntry = {
      id,
      secret_hash: hashOf(secret),
      namespace,
      providers,
      end_user: shape.end_user ?? null,
      redirect_uri: redirect,
      verify: shape.verify ?? false,
      allow_disconnect: shape.allow_disconnect ?? false,
      branding: shape.branding ?? {},
      created_by: actorOf(principal),
      creator: principal.kind === 'token' ? (principal.idHash ?? null) : null,
      scopes: principal.kind === 'root' ? ['**'] : [...principal.scopes],
      created_at: now,
      expires_at: now + (shape.expires_in ?? DEFAULT_EXPIRES_IN) * 1000,
      revoked_at: null,
      started: {},
      completed: {},
    };
    await this.#write(entry);
    await deps.events.append({
      type: 'connect_session.created',
      actor: entry.created_by,
      resource: namespace,
      data: {
        session_id: id,
        providers,
        end_user_id: entry.end_user?.id ?? null,
        expires_at: isoTime(entry.expires_at),
      },
    });
    return { id, url: `${deps.baseUrl}/connect#${secret}`, expires_at: isoTime(entry.expires_at) };
  }

  /**
   * The sessions of namespaces the caller covers, newest first (at most 500).
   *
   * @throws {KeywayError} `invalid_path` for a `namespace` filter that is not a path.
   */
  async list(principal: Principal, namespace?: string): Promise<ConnectSessionView[]> {
    const within = namespace === undefined ? undefined : parseResourcePath(namespace, 'namespace');
    const entries = await this.#deps.storage.listVaultEntries({ kind: SESSION_KIND, limit: 500 });
    const now = this.#deps.now();
    const views: ConnectSessionView[] = [];
    for (const stored of entries) {
      const entry = SessionEntrySchema.parse(JSON.parse(await this.#deps.vault().open(stored)));
      const visible = principal.kind === 'root' || setCoversPath(principal.scopes, entry.namespace);
      const chosen =
        within === undefined ||
        entry.namespace === within ||
        entry.namespace.startsWith(`${within}/`);
      if (visible && chosen) views.push(viewOf(entry, now));
    }
    return views.sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
  }

  /**
   * Ends a session before its expiry: its secret is refused from then on.
   *
   * @throws {KeywayError} `not_found` (also for a session of a namespace the caller does
   *   not cover).
   */
  async revoke(principal: Principal, id: string): Promise<ConnectSessionView> {
    const entry = await this.#read(id);
    if (
      entry === null ||
      (principal.kind !== 'root' && !setCoversPath(principal.scopes, entry.namespace))
    ) {
      throw new KeywayError('not_found', `no connect session ${JSON.stringify(id)}`);
    }
    if (entry.revoked_at === null) {
      entry.revoked_at = this.#deps.now();
      await this.#write(entry);
    }
    return viewOf(entry, this.#deps.now());
  }

  /**
   * The page's access: its session, when the secret is one's, live, and its creator's
   * token still covers the namespace. A wrong secret counts as a failed authentication of
   * the client address.
   *
   * @throws {KeywayError} `invalid_token`, `rate_limited`.
   */
  async open(secret: string, clientAddress: string | null = null): Promise<ConnectPage> {
    const deps = this.#deps;
    if (clientAddress !== null) await deps.limiter?.assertMayAuthenticate(clientAddress);
    const entry = await this.#match(secret);
    if (entry === null) {
      if (clientAddress !== null) await deps.limiter?.recordFailedAuthentication(clientAddress);
      throw new KeywayError('invalid_token', UNKNOWN);
    }
    return new ConnectPage(deps, entry, (next) => this.#write(next));
  }

  async #match(secret: string): Promise<SessionEntry | null> {
    const match = /^kcs_([A-Za-z0-9_-]{16})\.[A-Za-z0-9_-]{43}$/.exec(secret);
    if (match === null) return null;
    const entry = await this.#read(match[1] as string);
    if (entry === null) return null;
    const given = fromBase64Url(hashOf(secret));
    const kept = fromBase64Url(entry.secret_hash);
    if (given === null || kept === null || !timingSafeEqual(given, kept)) return null;
    const now = this.#deps.now();
    if (entry.revoked_at !== null || entry.expires_at <= now) return null;
    // The creator's token deleted, expired or narrowed away from the namespace (not another
    // token given its name since): the session ends.
    if (entry.creator !== null) {
      const creator = await this.#deps.storage.findTokenByIdHash(entry.creator);
      if (
        creator === null ||
        creator.expiresAt <= now ||
        !setCoversPath(creator.scopes, entry.namespace)
      ) {
        return null;
      }
    }
    return entry;
  }
}

/** The last segment of a provider id: the default name of its connection. */
function lastSegment(id: string): string {
  return id.slice(id.lastIndexOf('/') + 1);
}

/**
 * What a connect page may do with its session, and nothing else: it acts as a principal of
 * its own whose scopes are the namespace and the offered providers (all covered by the
 * session's creator), never a broker token.
 */
export class ConnectPage {
  readonly #deps: ConnectDeps;
  readonly #entry: SessionEntry;
  readonly #save: (entry: SessionEntry) => Promise<void>;
  readonly principal: Principal;

  constructor(
    deps: ConnectDeps,
    entry: SessionEntry,
    save: (entry: SessionEntry) => Promise<void>,
  ) {
    this.#deps = deps;
    this.#entry = entry;
    this.#save = save;
    // Its authorizations are tied to the creator's token: revoking that ends them too.
    this.principal = {
      kind: 'token',
      name: `connect-session.${entry.id}`,
      scopes: canonicalizeScopes([entry.namespace, ...(entry.providers ?? [])]),
      expiresAt: entry.expires_at,
      ...(entry.creator === null ? {} : { idHash: entry.creator }),
    };
  }

  get id(): string {
    return this.#entry.id;
  }

  /** The offered providers' ids: those named, else every provider its creator covers. */
  async #offered(): Promise<string[]> {
    if (this.#entry.providers !== null) return this.#entry.providers;
    const within = this.#entry.scopes.includes('**')
      ? undefined
      : this.#entry.scopes.map((scope) => scope.replace(/\/\*\*$/, ''));
    const records = await this.#deps.storage.listProviders({
      ...(within === undefined ? {} : { within }),
      limit: 50,
    });
    return records.map((record) => record.id);
  }

  /**
   * The connection a provider's authorization starts: `<namespace>/<provider's last
   * segment>`, or the whole provider id when two offered providers share that segment.
   */
  #connectionOf(providerId: string, offered: string[]): string {
    if (!offered.includes(providerId)) {
      throw new KeywayError(
        'not_found',
        `provider ${JSON.stringify(providerId)} is not offered here`,
      );
    }
    const name = lastSegment(providerId);
    const shared = offered.filter((id) => lastSegment(id) === name).length > 1;
    return `${this.#entry.namespace}/${shared ? providerId : name}`;
  }

  /**
   * What the page shows: the branding, each offered provider with its connection's status.
   * A connection the page started that is now active is told once as
   * `connect_session.completed`.
   */
  async view(): Promise<ConnectPageView> {
    const deps = this.#deps;
    const providers: OfferedProvider[] = [];
    const offered = await this.#offered();
    for (const providerId of offered) {
      const record = await deps.storage.getProvider(providerId);
      if (record === null) continue;
      const connectionId = this.#connectionOf(providerId, offered);
      const connection = await deps.storage.getConnection(connectionId);
      const state = providerState(record);
      const view = connection === null ? null : connectionView(connection, deps.now());
      providers.push({
        provider_id: providerId,
        label: state.label,
        connection_id: connectionId,
        status: view?.status ?? null,
        account: view?.account ?? null,
        signs_in_at: new URL(state.authorization_server.authorization_endpoint).host,
        error:
          view?.error == null
            ? null
            : { code: view.error.code, description: view.error.description },
      });
      const started = this.#entry.started[connectionId];
      if (
        connection?.status === 'active' &&
        started !== undefined &&
        connection.updatedAt >= started &&
        this.#entry.completed[connectionId] === undefined
      ) {
        await this.#completed(connectionId, providerId);
      }
    }
    const entry = this.#entry;
    return {
      branding: entry.branding,
      end_user: entry.end_user?.name === undefined ? null : { name: entry.end_user.name },
      expires_at: isoTime(entry.expires_at),
      allow_disconnect: entry.allow_disconnect,
      redirect_uri: entry.redirect_uri,
      // The configuration keeps `KEYWAY_ALLOWED_REDIRECTS` as origins already.
      opener_origins:
        entry.redirect_uri === null
          ? [...deps.allowedRedirects]
          : [new URL(entry.redirect_uri).origin],
      providers,
    };
  }

  async #completed(connectionId: string, providerId: string): Promise<void> {
    this.#entry.completed[connectionId] = this.#deps.now();
    await this.#save(this.#entry);
    await this.#deps.events.append({
      type: 'connect_session.completed',
      actor: `connect_session:${this.#entry.id}`,
      resource: connectionId,
      data: {
        session_id: this.#entry.id,
        provider_id: providerId,
        end_user_id: this.#entry.end_user?.id ?? null,
      },
    });
  }

  /**
   * Starts the authorization of an offered provider's connection and answers its consent
   * URL (with `verify: true`, the completed consent waits for the app's confirmation).
   *
   * @param input `{ provider_id }`, the body of `POST /connect/api/authorize`, checked here.
   * @throws {KeywayError} `invalid_request`, `not_found` (a provider not offered), and those of
   *   `connections.authorize`.
   */
  async start(
    input: ConnectStartInput,
  ): Promise<{ connection_id: string; authorization_url: string }> {
    const provider = parseResourcePath(
      parseShape(ConnectStartBody, input).provider_id,
      'provider_id',
    );
    const connectionId = this.#connectionOf(provider, await this.#offered());
    // With `verify`, the consent comes back to the app, which confirms the user there.
    const started = await this.#deps.authorize(
      this.principal,
      provider,
      {
        connection_id: connectionId,
        ...(this.#entry.verify && this.#entry.redirect_uri !== null
          ? { verify_user: true, redirect_to: this.#entry.redirect_uri }
          : {}),
      },
      { page: 'connect' },
    );
    this.#entry.started[connectionId] = this.#deps.now();
    await this.#save(this.#entry);
    return { connection_id: connectionId, authorization_url: started.authorization_url };
  }

  /**
   * Deletes an offered provider's connection, when the session allows it.
   *
   * @throws {KeywayError} `insufficient_scope` (not allowed), `not_found`.
   */
  async disconnect(providerId: string): Promise<void> {
    if (!this.#entry.allow_disconnect) {
      throw new KeywayError(
        'insufficient_scope',
        'this connect session does not allow disconnecting (allow_disconnect)',
      );
    }
    const provider = parseResourcePath(providerId, 'provider_id');
    await this.#deps.disconnect(
      this.principal,
      this.#connectionOf(provider, await this.#offered()),
    );
  }
}
