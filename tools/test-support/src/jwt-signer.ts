/* An ES256 key of a test's issuer (an identity provider, a workload's): it signs JWTs. */

const b64url = (bytes: Uint8Array | string) =>
  Buffer.from(typeof bytes === 'string' ? Buffer.from(bytes) : bytes).toString('base64url');

/** A fresh P-256 key pair: its public JWK, and a signer of compact JWTs. */
export async function es256Signer(): Promise<{
  publicJwk: JsonWebKey;
  sign: (claims: object, header?: object) => Promise<string>;
}> {
  const pair = (await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ])) as CryptoKeyPair;
  const sign = async (claims: object, header: object = { alg: 'ES256', typ: 'JWT' }) => {
    const head = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
    const signature = await crypto.subtle.sign(
      { name: 'ECDSA', hash: 'SHA-256' },
      pair.privateKey,
      new TextEncoder().encode(head),
    );
    return `${head}.${b64url(new Uint8Array(signature))}`;
  };
  return { publicJwk: await crypto.subtle.exportKey('jwk', pair.publicKey), sign };
}
