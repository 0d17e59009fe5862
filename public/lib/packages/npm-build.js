// An npm deps build, in a tab's build worker (../../build-worker.js) or in a dynamic worker at
// the edge (durable/js/edge-build.js): the dependencies resolved, fetched and checked (npm.js)
// while esbuild-wasm starts, then each package and each subpath the code imports bundled
// (bundle.js) into the deps layer's files.

import { bundlePackages } from "./bundle.js";
import { installNpm } from "./npm.js";

/**
 * @param request the `build` command's `build` ({dependencies, subpaths})
 * @param sources the tenant's package sources (npmRegistry)
 * @param via the build's Registry (registry.js), whose budget the tree and the bundles count into
 * @param progress (phase, detail) => void
 * @param esbuild esbuild-wasm, initialized once `ready` resolves
 * @returns {Promise<{files: Map<string, Uint8Array>, resolved: string[]}>}
 */
export async function buildNpm({ dependencies, subpaths = [] }, sources, via, progress, { esbuild, ready }) {
  const [{ files, installed }] = await Promise.all([installNpm(dependencies, sources.npmRegistry, via, progress), ready]);
  const specifiers = [...Object.keys(dependencies), ...subpaths];
  const imports = subpaths.length ? ` and ${subpaths.length} subpaths` : "";
  progress("bundle", `${Object.keys(dependencies).length} packages${imports} with esbuild ${esbuild.version}`);
  const bundled = await bundlePackages(esbuild, files, specifiers, via.budget);
  return { files: bundled, resolved: installed.map(({ name, version }) => `${name}@${version}`) };
}
