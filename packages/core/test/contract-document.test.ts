import { describe, expect, it } from 'vitest';
import { type ContractShape, contractSchema, queryParameters } from '../src/contract/index.js';

describe('the contract as JSON Schema', () => {
  it('reads each query parameter as its shape types it', () => {
    expect(queryParameters('CredentialsQuery')).toEqual({ force_refresh: 'boolean' });
    expect(queryParameters('AuditListQuery')).toEqual({
      prefix: 'string',
      type: 'string',
      since: 'string',
      limit: 'integer',
      cursor: 'string',
    });
    expect(queryParameters('ConnectionListQuery')).toEqual({
      prefix: 'string',
      provider_id: 'string',
      status: 'string',
      limit: 'integer',
      cursor: 'string',
    });
    // The same frozen object each time: a handler reads it on every request.
    expect(queryParameters('TokenListQuery')).toBe(queryParameters('TokenListQuery'));
    expect(Object.isFrozen(queryParameters('TokenListQuery'))).toBe(true);
  });

  it('writes a request as it may be sent and an answer as it is written', () => {
    const input = contractSchema('VerifyBody', 'input');
    expect(input).toEqual({
      type: 'object',
      properties: { flow_id: { type: 'string', minLength: 1, maxLength: 200 } },
      required: ['flow_id'],
      additionalProperties: false,
    });
    const page = contractSchema('TokenPage') as {
      properties: { items: { items: { required: string[] } }; next_cursor: unknown };
      required: string[];
    };
    expect(page.required).toEqual(['items', 'next_cursor']);
    expect(page.properties.next_cursor).toEqual({ type: ['string', 'null'] });
    expect(page.properties.items.items.required).toContain('name');
  });

  it('answers a fresh copy, which the caller may change', () => {
    const first = contractSchema('ErrorBody');
    first.type = 'changed';
    expect(contractSchema('ErrorBody').type).toBe('object');
  });

  it('refuses a shape it does not have, naming it', () => {
    expect(() => contractSchema('SecretBody' as ContractShape)).toThrow(
      new TypeError('unknown contract shape "SecretBody"'),
    );
    expect(() => contractSchema('toString' as ContractShape)).toThrow(
      new TypeError('unknown contract shape "toString"'),
    );
  });
});
