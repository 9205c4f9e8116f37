/**
 * The method of `broker.connections` that answers a connection's view as the HTTP
 * contract's JSON (`GET /api/oauth/connections/<path>`, docs/api.md §5), for what serves
 * the contract (`@keyway/http`): `connections.get` serialized, made once per
 * stored record and answered again while the record read is the same one.
 */
export const CONNECTION_VIEW_JSON: unique symbol = Symbol.for('keyway.connectionViewJson');
