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
    const keys = Object.keys(value).sort(compareCodePoints);
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`).join(",")}}`;
  }
  throw new Error(`canonical JSON cannot hold a ${typeof value}`);
}

// Array.prototype.sort compares UTF-16 code units, which orders characters above U+FFFF
// before U+E000..U+FFFF; code point order is what Rust's str ordering gives.
function compareCodePoints(a, b) {
  const left = [...a];
  const right = [...b];
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    const diff = left[i].codePointAt(0) - right[i].codePointAt(0);
    if (diff !== 0) return diff;
  }
  return left.length - right.length;
}
