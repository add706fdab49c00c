"""Which calls a HumanEval check certainly makes first, and which names it may look up: read
from the check's source, never run. Standard library only.
"""

from __future__ import annotations

import ast
import opcode
import sys
import types


_LAZY = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.BoolOp, ast.IfExp,
         ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await, ast.Starred)


def _planned_calls(check: str | ast.Module) -> tuple[str | None, list, bool]:
    """(entry point, [(args, kwargs), ...], early): the calls of the entry point that a HumanEval check
    ``def check(candidate): ...`` followed by ``check(<entry point>)`` makes first, whatever the
    solution answers: those in the leading statements of its body that are plain (``assert``,
    expression, assignment to names other than the parameter), each with at most one call of the
    parameter whose arguments are literals, outside anything that evaluates lazily or
    conditionally. The plan ends at the first statement that is not such. Anything unexpected
    gives no plan. ``early``: nothing the check runs before ``check(<entry point>)`` can call the
    solution (:func:`_calls_nothing`), so the planned calls may run as soon as the solution is
    defined, in the same round trip as its names. ``check``: its source, or the source parsed."""
    try:
        body = (check if isinstance(check, ast.Module) else ast.parse(check)).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None, [], False
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
    param = fn.args.args[0].arg
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
        found = _literal_call(expr, param)
        if found is None:
            break
        calls += found
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


#: Instructions that read a name from the globals (at module level, from the namespace itself),
#: and the one that binds a name at module level.
_GLOBAL_LOADS = frozenset(opcode.opmap[name] for name in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS")
                          if name in opcode.opmap)
_LOAD_GLOBAL = opcode.opmap["LOAD_GLOBAL"]
_STORE_NAME = opcode.opmap["STORE_NAME"]
#: Since 3.11 LOAD_GLOBAL's argument is the name's index shifted left by one (the low bit pushes a NULL).
_LOAD_GLOBAL_SHIFT = 1 if sys.version_info >= (3, 11) else 0


def _global_names(code: types.CodeType) -> set:
    """The names ``code`` and the code nested in it read as globals, less those its own module
    level binds (its ``def check``, its imports): what the solution may have to provide. Only
    names the check *reads* as globals, never its attribute names or its own definitions: the
    solution is told which names to send, and must learn nothing else of the hidden check."""
    return _loaded_globals(code) - _names_of(code, frozenset((_STORE_NAME,)))


def _loaded_globals(code: types.CodeType) -> set:
    names = _names_of(code, _GLOBAL_LOADS)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _loaded_globals(const)
    return names


def _names_of(code: types.CodeType, ops: frozenset) -> set:
    """The names the instructions ``ops`` of ``code`` (not of the code nested in it) name.
    *Why not* ``dis.get_instructions``: it builds an object per instruction (positions included),
    about 0.2 ms per HumanEval check, on the check server's path; this reads the bytes
    (``tests/test_execution_inside.py`` compares the two on every HumanEval check)."""
    raw, names, found, extended = code.co_code, code.co_names, set(), 0
    for i in range(0, len(raw), 2):
        op, arg = raw[i], raw[i + 1] | extended
        extended = arg << 8 if op == opcode.EXTENDED_ARG else 0
        if op in ops:
            found.add(names[arg >> _LOAD_GLOBAL_SHIFT if op == _LOAD_GLOBAL else arg])
    return found


def _stdlib(module: str) -> bool:
    names = getattr(sys, "stdlib_module_names", ())
    return module.partition(".")[0] in names
