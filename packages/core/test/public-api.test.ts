import ts from 'typescript';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import * as schemas from '../src/contract/schemas.js';
import type {
  AuthorizeResult,
  Broker,
  BrokerConfig,
  ConnectionErrorCode,
  ConnectionView,
  Credentials,
  CredentialsQueryInput,
  DiscoveryTrace,
  IssuedToken,
  KeywayErrorCode,
  MintTokenInput,
  Page,
  Principal,
  ProviderInput,
  ProviderView,
  PutSecretInput,
  SecretView,
  SecretWithValue,
  TokenView,
} from '../src/index.js';
import * as core from '../src/index.js';

/**
 * The public surface of `@keyway/core`, held still: a change to it is a visible diff here.
 * Type-only exports are checked by `expectTypeOf` and by the TSDoc check below.
 */
describe('the root entry of @keyway/core', () => {
  it('exports exactly these values', () => {
    expect(Object.keys(core).sort()).toEqual([
      'InsufficientScopeError',
      'KeywayError',
      'OutboundError',
      'connectionFetch',
      'createBroker',
      'deriveVaultKey',
      'generateVaultKey',
      'isKeywayError',
      'parseResourcePath',
      'resourcePathFromUrl',
      'rootPrincipal',
    ]);
  });

  it('has the signatures an embedding app relies on', () => {
    expectTypeOf(core.createBroker).parameters.toEqualTypeOf<[BrokerConfig]>();
    expectTypeOf(core.createBroker).returns.toEqualTypeOf<Broker>();
    expectTypeOf<Broker['authenticate']>().returns.toEqualTypeOf<Promise<Principal>>();
    expectTypeOf<Broker['authorize']>().parameters.toEqualTypeOf<[Principal, string]>();
    // Core operations take the acting principal and a typed input, which they still parse
    // (JavaScript callers exist).
    expectTypeOf<Broker['tokens']['mint']>().parameters.toEqualTypeOf<
      [Principal, MintTokenInput]
    >();
    expectTypeOf<Broker['tokens']['list']>().returns.toEqualTypeOf<Promise<Page<TokenView>>>();
    expectTypeOf<Broker['providers']['put']>().parameters.toEqualTypeOf<
      [Principal, string, ProviderInput]
    >();
    expectTypeOf<Broker['providers']['get']>().returns.toEqualTypeOf<Promise<ProviderView>>();
    expectTypeOf<Broker['connections']['credentials']>().parameters.toEqualTypeOf<
      [Principal, string, CredentialsQueryInput?]
    >();
    expectTypeOf<Broker['connections']['credentials']>().returns.toEqualTypeOf<
      Promise<Credentials>
    >();
    expectTypeOf<Broker['secrets']['put']>().parameters.toEqualTypeOf<
      [Principal, string, PutSecretInput]
    >();
    // What never takes a principal is not there.
    expectTypeOf<Broker['providers']>().not.toHaveProperty('resolve');
    expectTypeOf<Broker['providers']>().not.toHaveProperty('clientSecret');
    expectTypeOf<Broker['connections']>().not.toHaveProperty('requireReauthorizationOf');
  });

  it('names every error with a code from a closed union', () => {
    expectTypeOf<core.KeywayError['code']>().toEqualTypeOf<KeywayErrorCode>();
    expectTypeOf<core.InsufficientScopeError['code']>().toEqualTypeOf<'insufficient_scope'>();
    // A refused or failed outbound request is an upstream_error, its reason in `failure`.
    expectTypeOf<core.OutboundError['code']>().toEqualTypeOf<KeywayErrorCode>();
    expectTypeOf<core.OutboundError['failure']>().toEqualTypeOf<core.OutboundFailure>();
    expectTypeOf<core.OutboundError>().toExtend<core.KeywayError>();
    expectTypeOf<core.ConnectionView['error']>().toEqualTypeOf<{
      code: ConnectionErrorCode;
      description: string;
    } | null>();
    expectTypeOf<'access_denied'>().toExtend<ConnectionErrorCode>();
    expectTypeOf<'upstream_error'>().toExtend<KeywayErrorCode>();
  });

  it('describes every answer with a response schema of exactly the type the operation returns', () => {
    expectTypeOf<z.output<typeof schemas.TokenViewBody>>().toEqualTypeOf<TokenView>();
    expectTypeOf<z.output<typeof schemas.IssuedTokenBody>>().toEqualTypeOf<IssuedToken>();
    expectTypeOf<z.output<typeof schemas.ProviderViewBody>>().toEqualTypeOf<ProviderView>();
    expectTypeOf<z.output<typeof schemas.DiscoveryTraceBody>>().toEqualTypeOf<DiscoveryTrace>();
    expectTypeOf<z.output<typeof schemas.DiscoveryReportBody>>().toEqualTypeOf<
      Awaited<ReturnType<core.Broker['providers']['discover']>>
    >();
    expectTypeOf<z.output<typeof schemas.ConnectionViewBody>>().toEqualTypeOf<ConnectionView>();
    expectTypeOf<z.output<typeof schemas.AuthorizeResultBody>>().toEqualTypeOf<AuthorizeResult>();
    expectTypeOf<z.output<typeof schemas.CredentialsBody>>().toEqualTypeOf<Credentials>();
    expectTypeOf<z.output<typeof schemas.SecretViewBody>>().toEqualTypeOf<SecretView>();
    expectTypeOf<z.output<typeof schemas.SecretWithValueBody>>().toEqualTypeOf<SecretWithValue>();
    expectTypeOf<z.output<typeof schemas.ProbeResultBody>>().toEqualTypeOf<core.ProbeResult>();
    expectTypeOf<z.output<typeof schemas.EventBody>>().toEqualTypeOf<core.KeywayEvent>();
    type DeliveryView = Awaited<ReturnType<Broker['events']['deliveries']>>['items'][number];
    expectTypeOf<z.output<typeof schemas.DeliveryViewBody>>().toEqualTypeOf<DeliveryView>();
    type Sessions = Broker['connectSessions'];
    type Page = Awaited<ReturnType<Sessions['open']>>;
    expectTypeOf<z.output<typeof schemas.CreatedConnectSessionBody>>().toEqualTypeOf<
      Awaited<ReturnType<Sessions['create']>>
    >();
    expectTypeOf<z.output<typeof schemas.ConnectSessionViewBody>>().toEqualTypeOf<
      Awaited<ReturnType<Sessions['revoke']>>
    >();
    expectTypeOf<z.output<typeof schemas.ConnectPageViewBody>>().toEqualTypeOf<
      Awaited<ReturnType<Page['view']>>
    >();
    expectTypeOf<z.output<typeof schemas.ConnectStartedBody>>().toEqualTypeOf<
      Awaited<ReturnType<Page['start']>>
    >();
    expect(Object.keys(schemas).length).toBeGreaterThan(20);
  });

  it('documents every export with a summary and a reference to what it implements', () => {
    const entry = new URL('../src/index.ts', import.meta.url).pathname;
    const program = ts.createProgram([entry], {
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      target: ts.ScriptTarget.ES2022,
      noEmit: true,
    });
    const checker = program.getTypeChecker();
    const source = program.getSourceFile(entry);
    if (source === undefined) throw new Error('no entry');
    const moduleSymbol = checker.getSymbolAtLocation(source);
    if (moduleSymbol === undefined) throw new Error('no module');
    const undocumented: string[] = [];
    const exports = checker.getExportsOfModule(moduleSymbol);
    for (const exported of exports) {
      const symbol =
        exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const summary = ts.displayPartsToString(symbol.getDocumentationComment(checker)).trim();
      const tags = symbol.getJsDocTags(checker).map((tag) => tag.name);
      if (summary === '') undocumented.push(`${exported.name}: no summary`);
      if (!tags.includes('see')) undocumented.push(`${exported.name}: no @see`);
    }
    expect(exports.length).toBeLessThanOrEqual(60);
    expect(undocumented).toEqual([]);
  });
});
