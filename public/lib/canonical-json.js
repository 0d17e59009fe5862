// Canonical JSON, the byte form a capsule manifest is signed in (docs/CAPSULE.md). It must match
// src/capsule/canonical.rs byte for byte, and tests/canonical_cases.json holds both to one table:
// object keys sorted by UTF-16 code units, no whitespace, strings escaped as JSON.stringify does
// (only ", \ and control characters), numbers only as integers of magnitude at most 2^53 - 1.
//
// The page parses capsule.json with JSON.parse, which has already rounded a longer integer
// literal to the nearest double by the time it gets here. So the rule is checked on the parsed
// number: anything past Number.MAX_SAFE_INTEGER is refused, 2^53 itself too, since 2^53 + 1
// parses to it.

export function canonicalJson(value) {
  return write(value, "");
}

/** `pointer` is where `value` is, as a JSON Pointer (RFC 6901), for error messages. */
function write(value, pointer) {
  if (value === null || typeof value === "boolean" || typeof value === "string") {
    return JSON.stringify(value);
  }
  if (typeof value === "number") return integer(value, pointer);
  if (Array.isArray(value)) return `[${value.map((item, i) => write(item, `${pointer}/${i}`)).join(",")}]`;
  if (typeof value === "object") {
    // sort() compares UTF-16 code units, which is the order docs/CAPSULE.md (RFC 8785) fixes.
    const keys = Object.keys(value).sort();
    const member = (key) => `${JSON.stringify(key)}:${write(value[key], `${pointer}/${escapePointer(key)}`)}`;
    return `{${keys.map(member).join(",")}}`;
  }
  throw refuse(`a ${typeof value}`, pointer, "only JSON values");
}

/** RFC 6901: `~` and `/` in a key are written `~0` and `~1`. */
function escapePointer(key) {
  return key.replace(/~/g, "~0").replace(/\//g, "~1");
}

function integer(value, pointer) {
  if (Math.abs(value) > Number.MAX_SAFE_INTEGER) {
    throw refuse(`${value} is beyond ±(2^53 - 1)`, pointer, "only integers a JavaScript number keeps exactly");
  }
  if (!Number.isInteger(value)) throw refuse(`${value} is not an integer`, pointer, "only integers");
  return String(value);
}

/** The same words as the Rust side's refusals. */
function refuse(what, pointer, rule) {
  return new Error(`${what}, at ${pointer || "the top level"}: canonical JSON holds ${rule}`);
}
