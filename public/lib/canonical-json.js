// Canonical JSON, the byte form a capsule manifest is signed in (must match src/capsule/ in
// Rust byte for byte): object keys sorted by Unicode code point, no whitespace, strings escaped
// as JSON.stringify does (only ", \ and control characters), numbers only as integers.

export function canonicalJson(value) {
  if (value === null || typeof value === "boolean" || typeof value === "string") {
    return JSON.stringify(value);
  }
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) throw new Error(`canonical JSON has integers only, got ${value}`);
    return String(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (typeof value === "object") {
    // sort() compares UTF-16 code units, which is the order docs/CAPSULE.md (RFC 8785) fixes.
    const keys = Object.keys(value).sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`).join(",")}}`;
  }
  throw new Error(`canonical JSON cannot hold a ${typeof value}`);
}
