/**
 * mTLS on xDS: a client may only speak for the node its certificate names.
 * The identity is a SPIFFE ID in a URI SAN (as Istio issues them); the
 * node id a stream presents must be that ID, or its last path segments
 * (`spiffe://mesh.local/ns/a/node-1` lets a client be `node-1` or `a/node-1`).
 */

/** The `spiffe://` URI SANs of a certificate's subjectaltname text ("URI:…, DNS:…"). */
export function spiffeIds(subjectAltName: string | undefined): string[] {
  if (!subjectAltName) return [];
  return subjectAltName
    .split(/,\s*/)
    .filter((san) => san.startsWith('URI:spiffe://'))
    .map((san) => san.slice('URI:'.length));
}

/** Why `nodeId` may not be used by a peer holding `ids`, or undefined when it may. */
export function nodeIdRefusal(ids: readonly string[], nodeId: string): string | undefined {
  if (ids.length === 0) return 'the client certificate has no spiffe:// URI SAN';
  if (nodeId !== '' && ids.some((id) => id === nodeId || id.endsWith(`/${nodeId}`))) return undefined;
  return `node id "${nodeId}" does not match the client certificate's identity (${ids.join(', ')})`;
}
