// The executor suite's core with the page in firefox (lib/engine-suite.mjs).
import { engineSuite } from "../lib/engine-suite.mjs";

engineSuite("firefox");
