// Verifies capsule manifest signatures: compact JWS, EdDSA over Ed25519 (WebCrypto), with the
// public keys the server lists at /.well-known/relay-keys.json ({keys:[{kty:"OKP", crv:"Ed25519",
// x, kid, alg:"EdDSA"}]}). Old keys stay listed after a rotation, so a key id we have not seen
// makes us fetch the list again once.

import { canonicalJson } from "./canonical-json.js";
import { ValidationError } from "./errors.js";
import { memo } from "./memo.js";

export class KeyRing {
  /** @param loadKeySet () => Promise<{keys: object[]}> */
  constructor(loadKeySet) {
    this.loadKeySet = loadKeySet;
    // () => Promise<Map<kid, CryptoKey>>; a failed fetch is not remembered: the next capsule
    // tries again.
    this.keys = memo(() => this.fetchKeys());
  }

  async key(kid) {
    const found = (await this.load(false)).get(kid) ?? (await this.load(true)).get(kid);
    if (!found) throw new ValidationError(`signed with unknown key id "${kid}"`);
    return found;
  }

  load(fresh) {
    if (fresh) this.keys.forget();
    return this.keys();
  }

  async fetchKeys() {
    const { keys = [] } = await this.loadKeySet();
    const usable = keys.filter((jwk) => jwk.kty === "OKP" && jwk.crv === "Ed25519" && jwk.kid && jwk.x);
    const imported = await Promise.all(
      usable.map(async ({ kty, crv, x, kid }) => [
        kid,
        await crypto.subtle.importKey("jwk", { kty, crv, x }, { name: "Ed25519" }, false, ["verify"]),
      ]),
    );
    return new Map(imported);
  }
}

export function keySetFromServer(url = "/.well-known/relay-keys.json") {
  return async () => {
    const res = await fetch(url, { cache: "no-cache" });
    if (!res.ok) throw new Error(`GET ${url} answered ${res.status}`);
    return res.json();
  };
}

/**
 * Checks a manifest's `sig`: its payload must be exactly the canonical JSON of the manifest
 * without `sig`, and its signature must verify with the key its header names.
 * @param manifest the parsed capsule.json
 * @throws {ValidationError} saying what is wrong
 */
export async function verifyManifestSignature(manifest, keyRing) {
  const { sig, ...unsigned } = manifest;
  if (typeof sig !== "string") throw new ValidationError("manifest has no signature (sig)");
  const parts = sig.split(".");
  if (parts.length !== 3) throw new ValidationError("sig is not a compact JWS");
  const [headerPart, payloadPart, signaturePart] = parts;
  const header = parseJson(decodeBase64Url(headerPart), "JWS header");
  if (header.alg !== "EdDSA") throw new ValidationError(`JWS alg must be EdDSA, got ${header.alg}`);
  const expected = new TextEncoder().encode(canonicalize(unsigned));
  if (!equalBytes(decodeBase64Url(payloadPart), expected)) {
    throw new ValidationError("JWS payload differs from the canonical manifest (tampered or re-serialized)");
  }
  const key = await keyRing.key(header.kid);
  const signingInput = new TextEncoder().encode(`${headerPart}.${payloadPart}`);
  const valid = await crypto.subtle.verify({ name: "Ed25519" }, key, decodeBase64Url(signaturePart), signingInput);
  if (!valid) throw new ValidationError(`bad signature (key id "${header.kid}")`);
}

function canonicalize(value) {
  try {
    return canonicalJson(value);
  } catch (err) {
    throw new ValidationError(`manifest has no canonical form: ${err.message}`);
  }
}

function decodeBase64Url(text) {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) throw new ValidationError("JWS part is not base64url");
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (text.length % 4)) % 4));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

function parseJson(bytes, what) {
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    throw new ValidationError(`${what} is not JSON`);
  }
}

function equalBytes(a, b) {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}
