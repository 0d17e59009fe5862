// The runner worker for JavaScript: QuickJS, one run (see serve.js).
import { quickJsEngine } from "./quickjs.js";
import { serve } from "./serve.js";

serve(quickJsEngine);
