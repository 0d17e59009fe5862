// The runner worker for Python: Pyodide, one run (see serve.js).
import { pyodideEngine } from "./pyodide.js";
import { serve } from "./serve.js";

serve(pyodideEngine);
