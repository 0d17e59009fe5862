"""Runs one Python capsule inside the worker's shared Pyodide interpreter (see pyodide.js).

The interpreter is loaded once and reused, so each run gets the process state a fresh
`python <entry> <args>` would have (argv, environment, cwd, stdin, a fresh __main__) and the
interpreter is put back afterwards: modules the run imported are forgotten, so a later capsule
with a changed helper module imports its own copy.
"""

import io
import json
import os
import runpy
import sys
import traceback


def relay_run(config_json):
    """Runs the entry described by config_json ({entry, argv, env, cwd, stdin, wheels});
    returns the exit code."""
    config = json.loads(config_json)
    entry = config["entry"]
    saved = _save_state()
    try:
        sys.argv = [entry, *config["argv"]]
        # Like `python entry.py`: the entry's directory first, then any wheels of the capsule
        # (pure-Python wheels are importable straight from the zip).
        sys.path[:0] = [os.path.dirname(entry), *config["wheels"]]
        os.environ.update(config["env"])
        os.makedirs(config["cwd"], exist_ok=True)
        os.chdir(config["cwd"])
        sys.stdin = io.TextIOWrapper(io.BytesIO(config["stdin"].encode()), encoding="utf-8")
        return _run_entry(entry)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        _restore_state(saved)


def _run_entry(entry):
    try:
        runpy.run_path(entry, run_name="__main__")
        return 0
    except SystemExit as stop:
        return _exit_code(stop.code)
    except BaseException as error:  # anything uncaught ends the program, as in CPython
        traceback.print_exception(type(error), error, _user_frames(error.__traceback__, entry))
        return 1


def _exit_code(code):
    """sys.exit() semantics: None is 0, an int is itself, anything else is printed and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _user_frames(tb, entry):
    """The traceback from the entry's first frame on, hiding runpy and this helper."""
    start = tb
    while start is not None and start.tb_frame.f_code.co_filename != entry:
        start = start.tb_next
    return start


def _save_state():
    return {
        "argv": sys.argv[:],
        "path": sys.path[:],
        "environ": dict(os.environ),
        "cwd": os.getcwd(),
        "modules": set(sys.modules),
        "stdin": sys.stdin,
    }


def _restore_state(saved):
    sys.argv = saved["argv"]
    sys.path[:] = saved["path"]
    os.environ.clear()
    os.environ.update(saved["environ"])
    os.chdir(saved["cwd"])
    for name in set(sys.modules) - saved["modules"]:
        del sys.modules[name]
    sys.stdin = saved["stdin"]
