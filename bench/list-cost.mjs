// What the `tools/list` answer costs a client, part by part, in this process (no network): the
// answer's bytes by part, then the official TypeScript SDK client's work on it (JSON.parse, its
// zod check of the result, `cacheToolMetadata`, where a validator is found or compiled for each
// `outputSchema`; also with the `$id`s taken out, as before they were given), and what compiling
// each output schema costs, whole and without its descriptions, its `{error}` branch or its
// `minimum`s. bench/floor.mjs prints it after its round trips; medians of many repeats, so the
// figures are CPU, not waiting.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ListToolsResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";

const REPEATS = 200;
const WARMUP = 20;

/** Median ms of `run(setup())` over the repeats after the warm-up (setup untimed). */
function median(setup, run) {
  const times = [];
  for (let i = 0; i < REPEATS + WARMUP; i++) {
    const input = setup();
    const t0 = performance.now();
    run(input);
    if (i >= WARMUP) times.push(performance.now() - t0);
  }
  return times.sort((a, b) => a - b)[times.length >> 1];
}

const bytes = (value) => Buffer.byteLength(JSON.stringify(value));
const without = (schema, key) => JSON.parse(JSON.stringify(schema, (k, v) => (k === key ? undefined : v)));

/** The output schema with no `{error}` branch: the success shape alone. */
function successOnly(schema) {
  const copy = without(structuredClone(schema), "$id");
  delete copy.properties.error;
  copy.required = copy.anyOf[0].required;
  delete copy.anyOf;
  return copy;
}

/** Compiling `schema` in a new SDK validator (a new client's Ajv): median ms. */
const compile = (schema) =>
  median(() => [new AjvJsonSchemaValidator(), structuredClone(schema)], ([ajv, s]) => ajv.getValidator(s));

/** Prints the cost of `result` (a `tools/list` result) to a client, line by line. */
export function printListCost(result) {
  const text = JSON.stringify({ jsonrpc: "2.0", id: 1, result });
  const tools = result.tools;
  const part = (key) => tools.reduce((sum, tool) => sum + (tool[key] === undefined ? 0 : bytes(tool[key])), 0);
  console.log(
    `tools/list answer ${text.length} B: descriptions ${part("description")} B, inputSchemas ${part("inputSchema")} B, ` +
      `outputSchemas ${part("outputSchema")} B, annotations and titles ${part("annotations") + part("title")} B`,
  );
  const fmt = (ms) => `${ms.toFixed(3)} ms`;
  const parsed = () => ListToolsResultSchema.parse(JSON.parse(text).result).tools;
  const withoutIds = () => parsed().map((tool) => ({ ...tool, outputSchema: without(tool.outputSchema, "$id") }));
  const client = () => new Client({ name: "bench-list-cost", version: "1" });
  const same = client();
  const before = client();
  console.log(
    `  the SDK client's work per listing (median): JSON.parse ${fmt(median(() => 0, () => JSON.parse(text)))}, ` +
      `zod check ${fmt(median(() => JSON.parse(text).result, (r) => ListToolsResultSchema.parse(r)))}, ` +
      `cacheToolMetadata ${fmt(median(parsed, (t) => same.cacheToolMetadata(t)))} (a long-lived client), ` +
      `${fmt(median(() => [client(), parsed()], ([c, t]) => c.cacheToolMetadata(t)))} (a new client), ` +
      `${fmt(median(withoutIds, (t) => before.cacheToolMetadata(t)))} (a long-lived client, the schemas without $id as before)`,
  );
  // Ajv keeps each schema object it compiled (a Map keyed by the object): without `$id`s, each
  // listing's freshly parsed ones were compiled and kept anew.
  const kept = (c) => c._jsonSchemaValidator._ajv._cache.size;
  console.log(`  schemas kept by a client's Ajv after ${REPEATS + WARMUP} listings: ${kept(same)}, ${kept(before)} without $ids`);
  for (const tool of tools) {
    const o = tool.outputSchema;
    console.log(
      `  ${tool.name.padEnd(7)} outputSchema ${bytes(o)} B, compiled ${fmt(compile(o))}; without descriptions ${fmt(compile(without(o, "description")))}, ` +
        `without {error} ${fmt(compile(successOnly(o)))}, without minimum ${fmt(compile(without(o, "minimum")))}; its inputSchema ${fmt(compile(tool.inputSchema))}`,
    );
  }
}
