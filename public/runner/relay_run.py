"""Runs one Python capsule in a fresh Pyodide interpreter (see pyodide.js).

The runner worker serves a single run and is then thrown away, so nothing here needs undoing:
the run gets the process state a fresh `python <entry> <args>` would have (argv, environment,
cwd, stdin, a fresh __main__), and no later run ever sees what this one changed.
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


def relay_warm():
    """Imports what running an entry needs, while the worker waits as a standby, so the run
    itself does not pay for it. No guest code exists yet; nothing here is left for it."""
    warm = "/tmp/.relay-warm.py"
    with open(warm, "w"):
        pass
    try:
        runpy.run_path(warm, run_name="__main__")
    finally:
        os.remove(warm)


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
