import { KeywayError } from '../contract/errors.js';
import type { ProviderRegistry } from '../providers/registry.js';
import { handOutMember, handsOut, providerNotFound } from '../providers/state.js';
import type { Storage } from '../storage/contract.js';
import type { ConnectionRecord, HandOutRead, TokensRead } from '../storage/record-types.js';
import { CONNECTION_TOKENS_KIND } from './records.js';

/** What a hand-out reads before its tokens: all of it, or the connection alone. */
export type HandOutReads = Partial<HandOutRead> & Pick<HandOutRead, 'connection'>;

/**
 * A hand-out's reads: the connection, its sealed tokens and its provider's `hand_out`, in
 * one read when the storage can (`readForHandOut`); otherwise the connection alone, and
 * the rest is read as it is needed (`vaultEntry` and `provider` then `undefined`).
 */
export async function readForHandOut(
  storage: Storage,
  connectionId: string,
): Promise<HandOutReads | null> {
  const fast = storage.fastPaths;
  // Called as the adapter's methods: its fast paths may reach their store through `this`.
  if (fast?.readForHandOut !== undefined) {
    return fast.readForHandOut(connectionId, CONNECTION_TOKENS_KIND);
  }
  const connection = await storage.getConnection(connectionId);
  return connection === null ? null : { connection };
}

/**
 * A connection and its sealed tokens, for a use of them that hands nothing out (the gateway,
 * the API proxy, the probe): in one read without the provider where the storage offers it
 * (`readWithTokens`), else {@link readForHandOut}'s. `vaultEntry` is `undefined` when the
 * storage read the connection alone.
 */
export async function readWithTokens(
  storage: Storage,
  connectionId: string,
): Promise<HandOutReads | null> {
  const fast = storage.fastPaths;
  if (fast?.readWithTokens !== undefined) {
    return fast.readWithTokens(connectionId, CONNECTION_TOKENS_KIND);
  }
  return readForHandOut(storage, connectionId);
}

/**
 * {@link readWithTokens} without waiting, for a storage that reads synchronously
 * (`readWithTokensSync`, else `readForHandOutSync`): the connection and its vault entry, or
 * `null` for no such connection; `undefined` when the storage cannot answer without waiting.
 */
export function readWithTokensNow(
  storage: Storage,
  connectionId: string,
): TokensRead | null | undefined {
  const fast = storage.fastPaths;
  if (fast?.readWithTokensSync !== undefined) {
    return fast.readWithTokensSync(connectionId, CONNECTION_TOKENS_KIND);
  }
  return fast?.readForHandOutSync?.(connectionId, CONNECTION_TOKENS_KIND);
}

/**
 * Refuses a hand-out of a connection whose provider is inject-only (`hand_out: false`,
 * docs/api.md §13), judged from the declaration of a provider declared in code, else from
 * the provider's `hand_out` as read with the connection when it was (`provider`), else from
 * the provider read now.
 *
 * @throws {KeywayError} `credentials_not_exportable`; `not_found` for a provider that is
 *   gone; `internal_error` for a stored `hand_out` that is not a boolean.
 */
export async function assertExportable(
  providers: ProviderRegistry,
  record: ConnectionRecord,
  provider: HandOutRead['provider'] | undefined,
): Promise<void> {
  const id = record.providerId;
  const declared = providers.declaredSpec(id);
  let exportable: boolean;
  if (declared !== null) {
    // A provider declared in code hands out as declared; its stored state is brought to
    // the declaration first when that changed, as at every read of it.
    await providers.ensureDeclared(id);
    exportable = declared.handOut;
  } else if (provider === undefined) {
    exportable = handsOut(await providers.require(id));
  } else if (provider === null) {
    throw providerNotFound(id);
  } else {
    exportable = handOutMember(id, provider.handOut);
  }
  if (!exportable) {
    throw new KeywayError(
      'credentials_not_exportable',
      `provider ${JSON.stringify(id)} is inject-only ("hand_out": false): its tokens never leave the broker; call ` +
        `the server through the gateway ({base}/mcp/${record.id})`,
    );
  }
}
