// The executor suite's core with the page in chromium (lib/engine-suite.mjs).
import { engineSuite } from "../lib/engine-suite.mjs";

engineSuite("chromium");
