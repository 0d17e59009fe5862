"""Runs one Python capsule in a fresh Pyodide interpreter (see pyodide.js).

The runner worker serves a single run and is then thrown away, so nothing here needs undoing:
the run gets the process state a fresh `python <entry> <args>` would have (argv, environment,
cwd, stdin, a fresh __main__), and no later run ever sees what this one changed. The entry may
`await` at top level (as in a notebook): it is then driven to completion before the run ends.
`urllib.request.urlopen` works too, over the same guarded fetch as `pyodide.http.pyfetch`, and
the builtin `mcps` calls the tenant's upstream MCP servers: `await mcps.call(server, tool, params)`.

Blocking on a JavaScript promise (`run_sync`: driving a top-level await from a plain call,
`asyncio.run`, urllib) needs WebAssembly stack switching (JSPI). A runtime without it (WebKit, the edge)
calls `relay_run` with `can_block=False`: an entry that awaits at top level is then handed back
as an awaitable of its exit code, and urllib raises a URLError saying to use pyfetch.

A run in a context (config "context") is the exception: its worker serves the context's later
runs too, which share its `__main__` (variables, imports, definitions), as cells of a notebook
do, and the value of its last expression is shown (display) as a cell's is. Each still gets its
own argv, cwd, stdin and write policy.
"""

import ast
import builtins
import errno
import importlib
import io
import json
import os
import sys
import traceback
import types
import urllib.error
import urllib.request
import urllib.response
from email.message import Message

from pyodide.ffi import can_run_sync, run_sync

# Any of these in open()'s flags can change the file.
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

# The current run's write guard (pyodide.js), which the one audit hook asks: an audit hook
# cannot be removed, so a context's later runs swap the guard, not the hook.
_guard = None
_hooked = False
# A context's __main__, kept from one of its runs to the next.
_context_main = None


def relay_run(config_json, guard=None, can_block=True):
    """Runs the entry described by config_json ({entry, argv, env, cwd, stdin});
    returns the exit code, or, when it cannot block (`can_block` false) and the entry awaits at
    top level, an awaitable of it. `guard` (from pyodide.js) judges writes by the run's policy.
    The capsule's wheels are installed already (pyodide.js)."""
    config = json.loads(config_json)
    entry = config["entry"]
    keep = bool(config.get("context"))
    try:
        _prepare(config, guard)
        outcome = _run_entry(entry, can_block, keep)
    except BaseException:
        _finish(keep)
        raise
    if isinstance(outcome, int):
        _finish(keep)
        return outcome
    return _finishing(outcome, keep)


def _prepare(config, guard):
    """The process state of `python <entry> <args>`: argv, path, env, cwd, stdin. Made by the
    runner, not the guest: the run's guard judges only what runs after it (see _finish)."""
    global _guard, _hooked
    entry = config["entry"]
    sys.argv = [entry, *config["argv"]]
    # Like `python entry.py`: the entry's directory first.
    if sys.path[:1] != [os.path.dirname(entry)]:
        sys.path.insert(0, os.path.dirname(entry))
    # site-packages changed under the interpreter's import caches (from the snapshot).
    importlib.invalidate_caches()
    os.environ.update(config["env"])
    os.makedirs(config["cwd"], exist_ok=True)
    os.chdir(config["cwd"])
    sys.stdin = io.TextIOWrapper(io.BytesIO(config["stdin"].encode()), encoding="utf-8")
    _guard = guard
    if guard is not None and not _hooked:
        sys.addaudithook(_write_guard())
        _hooked = True


def _finish(keep=False):
    """Ends a run, and its guard last: guest code still runs here (the __del__ of what it left,
    its own sys.stdout's flush). Left in place, the guard judged what the runner does before the
    worker's next run (a context's, or the first after the standby's warm run: pyodide.js),
    installing its wheels and making its cwd, as writes that run was denied."""
    global _guard
    try:
        if not keep:
            _close_leftovers()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        _guard = None


async def _finishing(outcome, keep):
    try:
        return await outcome
    finally:
        _finish(keep)


def relay_warm():
    """Runs an empty entry while the worker waits as a standby, so the run itself does not pay
    for the first compile and exec, and routes urllib through the guarded fetch. No guest code
    exists yet; nothing here is left for it."""
    urllib.request.install_opener(urllib.request.build_opener(_FetchHandler))
    builtins.mcps = Mcps()
    builtins.display = display
    warm = "/tmp/.relay-warm.py"
    with open(warm, "w"):
        pass
    try:
        _exec_main(warm)
    finally:
        os.remove(warm)
    _reseed()


def _reseed():
    """Every interpreter starts from the same memory snapshot, which imported `random` (and
    tempfile's names may come from it): seeded from the OS's randomness here, each run draws its
    own numbers. The hash secret stays the snapshot's (CPython fixes it at startup)."""
    import random

    random.seed()
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None:
        tempfile._name_sequence = None  # made again, from a fresh Random, on first use


def relay_seal():
    """At the edge, before the guest (pyodide.js): nothing of Pyodide's JavaScript API stays
    reachable (pyodide.js unregistered `pyodide_js`; its modules go here), since through it a
    guest reaches the interpreter's memory and its work counter; ctypes, which writes that
    memory, and gc's object lists, which find what is left of it, are refused by an audit hook;
    and calls that would freeze the isolate (time.sleep's busy-wait, unseen by the work count;
    blocking on a promise, which needs JSPI) raise instead, naming what to use."""
    import asyncio
    import time

    import pyodide.http  # binds what pyfetch takes from pyodide_js while it is there
    import pyodide.webloop

    for name in [name for name in sys.modules if name == "pyodide_js" or name.startswith("pyodide_js.")]:
        # Its loader outlives it (the import system's records), holding the API: emptied.
        sys.modules.pop(name).__spec__.loader.jsproxy = None
    sys.addaudithook(_edge_audit)
    time.sleep = _edge_refuses("time.sleep", "`await asyncio.sleep(seconds)`")
    asyncio.run = _edge_refuses("asyncio.run", "`await main()` at top level")
    pyodide.webloop.WebLoop.run_until_complete = _edge_refuses("run_until_complete", "`await` at top level")


# Audit events the edge refuses: ctypes writes the interpreter's memory; the collector's lists
# hand out every live object, the import system's leftovers of what was sealed among them.
_EDGE_REFUSED = ("ctypes.", "gc.get_objects", "gc.get_referrers", "gc.get_referents")


def _edge_audit(event, _args):
    if event.startswith(_EDGE_REFUSED):
        what = "ctypes" if event.startswith("ctypes.") else event
        raise RuntimeError(f"{what} is not available at the edge executor (it reaches the interpreter's memory); run it in a tab (executor: tab)")


def _edge_refuses(what, instead):
    """A stand-in for `what`, which the edge executor cannot run (it would block its one thread)."""

    def refused(*_args, **_kwargs):
        raise RuntimeError(f"{what} is not available at the edge executor (it would block its only thread): use {instead}, or run it in a tab (executor: tab)")

    return refused


def _run_entry(entry, can_block, keep=False):
    """The entry's exit code; or, when it awaits at top level and this call cannot block, an
    awaitable of it."""
    try:
        main = _exec_main(entry, keep)
        if main is None:
            return _show_cell_value(keep)
        if not can_block:
            return _awaited(main, entry, keep)
        _drive(main)
        return _show_cell_value(keep)
    except BaseException as error:
        return _ended(error, entry)


async def _awaited(main, entry, keep):
    try:
        await main
        return _show_cell_value(keep)
    except BaseException as error:
        return _ended(error, entry)


# Where a context's run leaves the value of its last expression (see _cell).
_CELL_VALUE = "_relay_cell_value"


def _cell(source, entry):
    """A context's run as a notebook cell: its last statement, if an expression not ended by
    `;`, is kept in _CELL_VALUE, to be shown as Jupyter shows it (display)."""
    tree = compile(source, entry, "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Expr) and not source.rstrip().endswith(b";"):
        kept = ast.Assign(targets=[ast.Name(_CELL_VALUE, ast.Store())], value=last.value)
        tree.body[-1] = ast.fix_missing_locations(ast.copy_location(kept, last))
    return tree


def _show_cell_value(keep):
    """Shows what a context's cell left in _CELL_VALUE (not None); the exit code, 0."""
    if keep and _context_main is not None:
        value = _context_main.__dict__.pop(_CELL_VALUE, None)
        if value is not None:
            display(value)
    return 0


def _ended(error, entry):
    """The exit code of a program that raised `error`: sys.exit's, or 1 for anything uncaught
    (printed as CPython prints it)."""
    if isinstance(error, SystemExit):
        return _exit_code(error.code)
    _print_traceback(error, entry)
    return 1


def _exec_main(entry, keep=False):
    """Runs the entry as a fresh __main__ module, as `python entry.py` does (in a context, in
    the context's __main__: `keep`). A top-level await makes the compiled code a coroutine,
    which is returned (None otherwise)."""
    global _context_main
    with open(entry, "rb") as file:
        source = file.read()
    code = compile(_cell(source, entry) if keep else source, entry, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    main = _context_main if keep and _context_main is not None else types.ModuleType("__main__")
    if keep:
        _context_main = main
    main.__file__ = entry
    main.__cached__ = None
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    result = eval(code, main.__dict__)
    return result if isinstance(result, types.CoroutineType) else None


def _drive(coroutine):
    """Runs the entry's coroutine to its end; whatever it raises (SystemExit included) is
    raised here, not left to escape the event loop's task."""
    raised = []

    async def main():
        try:
            await coroutine
        except BaseException as error:
            raised.append(error)

    run_sync(main())
    if raised:
        raise raised[0]


URLLIB_NEEDS_JSPI = (
    "urllib.request blocks on the runner's fetch, which needs WebAssembly stack switching (JSPI); "
    "this runtime has none (a WebKit browser, or the edge executor): use `await pyodide.http.pyfetch(url)`, "
    "or run it in an executor tab in Chrome or Firefox"
)


class _FetchHandler(urllib.request.BaseHandler):
    """urllib's http and https, done with pyfetch (the page's guarded fetch, through the relay):
    blocking on it is fine under callPromising. Redirects were followed, and checked, by the
    relay; a refusal is a URLError whose reason starts with "PolicyDenied:"."""

    handler_order = 100  # before urllib's own socket-based handlers, which cannot work here

    def http_open(self, request):
        from pyodide.http import pyfetch

        if not can_run_sync():
            raise urllib.error.URLError(URLLIB_NEEDS_JSPI)

        options = {"method": request.get_method(), "headers": dict(request.header_items())}
        if request.data is not None:
            options["body"] = bytes(request.data)
        try:
            response = run_sync(pyfetch(request.full_url, **options))
            body = run_sync(response.bytes())
        except OSError as error:
            raise urllib.error.URLError(str(error)) from None
        headers = Message()
        for name, value in response.headers.items():
            headers[name] = value
        result = urllib.response.addinfourl(io.BytesIO(body), headers, response.url, response.status)
        result.msg = response.status_text  # as urllib's own handler sets it: the reason phrase
        return result

    https_open = http_open


# Richest first, as a notebook picks among a mime bundle's types.
_DISPLAY_ORDER = ("image/png", "image/jpeg", "image/svg+xml", "text/html", "text/markdown", "application/json", "text/plain")
_REPRS = {"image/png": "_repr_png_", "image/jpeg": "_repr_jpeg_", "image/svg+xml": "_repr_svg_", "text/html": "_repr_html_",
          "text/markdown": "_repr_markdown_", "application/json": "_repr_json_"}


def display(*objs, raw=False):
    """Shows each object in the call's result, as IPython's display() does: the richest of its
    _repr_png_/_repr_jpeg_/_repr_svg_/_repr_html_/_repr_markdown_/_repr_json_ (or
    _repr_mimebundle_); bytes of a PNG, JPEG, GIF or WebP image as that image; a str as text;
    anything JSON can hold as JSON (a list of records or a dict of columns becomes a table);
    else its repr. With raw=True each object is a mime bundle ({"text/html": "<b>hi</b>"})."""
    for obj in objs:
        if isinstance(obj, (bytes, bytearray, memoryview)):
            _show("", bytes(obj))
            continue
        bundle = obj if raw else _mime_bundle(obj)
        mime = next((m for m in _DISPLAY_ORDER if bundle.get(m) is not None), None)
        if mime is None:
            raise TypeError(f"display: nothing to show (a mime bundle needs one of {', '.join(_DISPLAY_ORDER)})")
        data = bundle[mime]
        if mime in ("image/png", "image/jpeg") and isinstance(data, str):
            data = __import__("base64").b64decode(data)  # IPython's reprs may give base64 text
        if isinstance(data, (bytes, bytearray, memoryview)):
            _show("", bytes(data))
        elif mime == "application/json" and not isinstance(data, str):
            _show(mime, json.dumps(data, default=str))
        else:
            _show(mime, str(data))


def _mime_bundle(obj):
    if isinstance(obj, str):
        return {"text/plain": obj}
    bundle = {}
    make = getattr(obj, "_repr_mimebundle_", None)
    if callable(make):
        made = make()
        bundle.update(made[0] if isinstance(made, tuple) else made or {})
    for mime, method in _REPRS.items():
        shown = getattr(obj, method, None)
        if callable(shown) and mime not in bundle:
            value = shown()
            if value is not None:
                bundle[mime] = value[0] if isinstance(value, tuple) else value
    if bundle:
        return bundle
    try:
        return {"application/json": json.dumps(obj)}
    except (TypeError, ValueError):
        return {"text/plain": repr(obj)}


def _show(mime, data):
    guard = _guard
    if guard is None:
        raise RuntimeError("display() works only while a run is running")
    if isinstance(data, bytes):
        from pyodide.ffi import to_js

        data = to_js(data)
    guard.display(mime, data)


class McpsError(RuntimeError):
    """A call of an upstream MCP server the relay refused or could not complete; its message
    starts with the error's name ("PolicyDenied: ...", "UpstreamFailed: ...")."""

    def __init__(self, name, message):
        super().__init__(f"{name}: {message}")
        self.name = name


class Mcps:
    """The builtin `mcps`: the tenant's upstream MCP servers (read /mcps/index.json and
    /mcps/<server>.d.ts for their tools). The call goes to the relay's /mcps-rpc route, which
    holds the servers' credentials; guest code never sees them. A refusal raises `mcps.Error`."""

    Error = McpsError

    async def call(self, server, tool, params=None):
        """Calls `tool` of `server` with `params` (a dict); returns the tool's result as a dict
        ({"content": [...], "structuredContent": ..., "isError": ...})."""
        from pyodide.http import pyfetch

        body = json.dumps({"mcp": server, "tool": tool, "params": params or {}})
        headers = {"content-type": "application/json"}
        response = await pyfetch("/mcps-rpc", method="POST", headers=headers, body=body)
        try:
            answer = json.loads(await response.text())
        except ValueError:
            answer = None
        if response.ok:
            return answer
        error = (answer or {}).get("error") or {}
        raise McpsError(error.get("name", "Internal"), error.get("message", f"/mcps-rpc answered HTTP {response.status}"))


def _close_leftovers():
    """Like CPython at exit: files the program left open are flushed and closed (which sends
    workspace files to the page), by letting go of what __main__ still holds. (No gc.collect():
    a full collection costs a warm run several times its own time.)"""
    main = sys.modules.get("__main__")
    if main is not None:
        main.__dict__.clear()


def _write_guard():
    """An audit hook refusing, before they happen, the writes the current run's policy forbids
    (its guard, `_guard`), with a PermissionError whose message starts "PolicyDenied:" and says
    what is writable. The filesystem beneath refuses them too (python-files.js), with a bare errno."""

    def check(path):
        guard = _guard
        if isinstance(path, int) or guard is None:
            return  # an open file descriptor: checked when it was opened
        target = os.path.realpath(os.fsdecode(path))
        denied = guard.deniedWrite(target)
        if denied:
            _refuse(errno.EACCES, denied, target)

    def on_open(path, mode, flags):
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (isinstance(flags, int) and flags & _WRITE_FLAGS):
            check(path)

    def on_symlink(target, link, dir_fd):
        link = os.path.abspath(os.fsdecode(link))
        points_to = os.path.normpath(os.path.join(os.path.dirname(link), os.fsdecode(target)))
        guard = _guard
        if guard is not None and (guard.inWorkspace(link) or guard.inWorkspace(points_to)):
            _refuse(errno.EPERM, f"symlinks in or into the workspace (/tmp, /out, /host, /mcps) are not allowed: {link} -> {points_to}", link)

    # A path relative to a directory descriptor (dir_fd, as shutil.rmtree uses) is left to the
    # filesystem's own check: it cannot be resolved here. The audit events give -1 for none.
    def on_path(path, *rest):
        if rest[-1] in (None, -1):
            check(path)

    def on_rename(source, target, source_dir_fd, target_dir_fd):
        if source_dir_fd in (None, -1):
            check(source)
        if target_dir_fd in (None, -1):
            check(target)

    handlers = {
        "open": on_open,
        "os.remove": on_path,
        "os.rmdir": on_path,
        "os.mkdir": on_path,
        "os.truncate": lambda path, length: check(path),
        "os.rename": on_rename,
        "os.symlink": on_symlink,
    }

    def hook(event, args):
        handler = handlers.get(event)
        if handler is not None:
            handler(*args)

    return hook


def _refuse(code, message, path):
    error = PermissionError(f"PolicyDenied: {message}")
    error.errno = code  # no filename: str(error) stays the message
    raise error


def _exit_code(code):
    """sys.exit() semantics: None is 0, an int is itself, anything else is printed and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _print_traceback(error, entry):
    """The traceback as CPython prints it, without this helper's frames (the write guard's
    included: a refused write points at the guest's call)."""
    report = traceback.TracebackException(type(error), error, _user_frames(error.__traceback__, entry))
    here = _print_traceback.__code__.co_filename
    report.stack = traceback.StackSummary.from_list([frame for frame in report.stack if frame.filename != here])
    print("".join(report.format()), end="", file=sys.stderr)


def _user_frames(tb, entry):
    """The traceback from the entry's first frame on, hiding this helper."""
    start = tb
    while start is not None and start.tb_frame.f_code.co_filename != entry:
        start = start.tb_next
    return start
