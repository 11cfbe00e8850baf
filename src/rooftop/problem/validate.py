"""A problem's own code checked against its shapes before any solution is judged by it.

A `get_inputs` whose parameters do not match a shape's, or a `get_init_inputs` that raises for a
held-out shape, is the problem author's mistake: it must stop the run with a `SpecError` naming
reference.py, never surface later as an `internal_error` recorded against a solution. The calls run
under the meta device, so even the largest shapes allocate nothing and compute nothing; code that
asks for an explicit device (`device="cpu"`, `.cuda()`) still runs there, as it would anyway.
"""

from __future__ import annotations

import inspect
import math
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from rooftop.errors import SpecError, on_one_line
from rooftop.problem.spec import Problem, Shape

_META = re.compile(r"\bmeta\b", re.IGNORECASE)
_CUDA = re.compile(r"\bCUDA\b|\bNVIDIA driver\b")


def check_problem(problem: Problem) -> None:
    """Raise a `SpecError` if the reference cannot make the inputs or the model of any shape
    (visible, held-out or smoke)."""
    module = _import(problem)
    for name in ("Model", "get_init_inputs", "get_inputs"):
        if not callable(getattr(module, name, None)):
            raise SpecError(problem.reference, name, "must be defined at module level and callable")
    inits: list[tuple[Shape, list[Any]]] = []
    for shape in problem.spec.all_shapes():
        init = _call(problem, module, "get_init_inputs", shape)
        inputs = _call(problem, module, "get_inputs", shape)
        if inputs is not None and not isinstance(inputs, (list, tuple)):
            raise _error(problem, "get_inputs", shape, f"must return a list or tuple (got {type(inputs).__name__})")
        if init is not None:
            init = _as_list(problem, init, shape)
            _bind_model(problem, module.Model, init, shape)
            inits.append((shape, init))
    _construct_models(problem, module.Model, inits)


MODEL_BUDGET_S = 0.25  # seconds of Model constructions per problem, so the check stays cheap


def _construct_models(problem: Problem, model: Callable[..., Any], inits: list[tuple[Shape, list[Any]]]) -> None:
    """Build the Model of each distinct set of init arguments, smallest first.

    On the meta device a constructor allocates nothing but still runs its Python, which for a
    quantizing constructor is a few hundred meta ops per shape: past MODEL_BUDGET_S the larger
    shapes keep only the signature check (their failures still surface, later, in an evaluation).
    """
    built: set[str] = set()
    spent = last = 0.0
    for shape, init in sorted(inits, key=lambda item: _size(item[1])):
        key = repr(init)  # a meta tensor's repr holds its shape and dtype, which is all it has
        if key in built:
            continue
        if spent + last > MODEL_BUDGET_S:  # the next one is larger: it would take at least as long
            return
        built.add(key)
        started = time.perf_counter()
        _construct(problem, model, init, shape)
        last = time.perf_counter() - started
        spent += last


def _size(init: list[Any]) -> float:
    """How large the model of these arguments is likely to be: the product of its sizes."""
    sizes = [a.numel() if isinstance(a, torch.Tensor) else abs(a) for a in init
             if isinstance(a, (int, float, torch.Tensor)) and not isinstance(a, bool)]
    return math.prod(max(s, 1) for s in sizes)


def _import(problem: Problem) -> Any:
    # imported here: the module loader belongs to the evaluation side (verdicts, values), which
    # importing rooftop.problem must not pull in
    from rooftop.problem.instance import import_file

    try:
        return import_file(problem.reference)
    except Exception as exc:
        raise SpecError(problem.reference, "", f"importing it failed: {_describe(exc)}") from None


def _call(problem: Problem, module: Any, name: str, shape: Shape) -> Any | None:
    """What the reference's function `name` returns for this shape on the meta device; None
    where only the meta device stopped it (an op with no meta kernel, a value read back)."""
    fn = getattr(module, name)
    kwargs = {} if problem.spec.kernelbench else dict(shape.params)
    mismatch = _keyword_mismatch(fn, kwargs)
    if mismatch:
        raise _error(problem, name, shape, f"{mismatch} (it takes {_parameters(fn)})")
    try:
        with _on_meta():
            return fn(**kwargs)
    except Exception as exc:
        if _meta_only(exc):
            return None
        raise _error(problem, name, shape, _describe(exc)) from None


def _keyword_mismatch(fn: Callable[..., Any], kwargs: dict[str, Any]) -> str | None:
    """Why `fn(**kwargs)` cannot bind, naming every stray and every missing argument at once."""
    try:
        signature = inspect.signature(fn)
        signature.bind(**kwargs)
    except ValueError:
        return None  # no signature to read (a builtin): the call itself says what is wrong
    except TypeError as exc:
        params = signature.parameters.values()
        by_keyword = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        takes_any = any(p.kind is p.VAR_KEYWORD for p in params)
        stray = [] if takes_any else [k for k in kwargs if k not in by_keyword]
        missing = [p.name for p in params if p.default is p.empty and p.name not in kwargs
                   and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        reasons = [_listed("got an unexpected keyword argument", "got unexpected keyword arguments", stray),
                   _listed("missing a required argument", "missing required arguments", missing)]
        return " and ".join(r for r in reasons if r) or str(exc)
    return None


def _listed(one: str, several: str, names: list[str]) -> str:
    if not names:
        return ""
    return f"{one} '{names[0]}'" if len(names) == 1 else f"{several} {', '.join(repr(n) for n in names)}"


def _as_list(problem: Problem, init: Any, shape: Shape) -> list[Any]:
    try:
        return list(init)
    except TypeError:
        raise _error(problem, "get_init_inputs", shape,
                     f"must return a list of Model's arguments (got {type(init).__name__})") from None


def _bind_model(problem: Problem, model: Callable[..., Any], init: list[Any], shape: Shape) -> None:
    try:
        inspect.signature(model).bind(*init)
    except TypeError as exc:
        raise _error(problem, "Model", shape, f"get_init_inputs gives {len(init)} argument(s) but "
                     f"Model takes {_parameters(model)}: {exc}") from None
    except ValueError:
        pass  # no signature to read: constructing it says what is wrong


def _construct(problem: Problem, model: Callable[..., Any], init: list[Any], shape: Shape) -> None:
    """Build `Model(*init)` on the meta device: parameters get shapes but no memory."""
    try:
        with _on_meta():
            model(*init)
    except Exception as exc:
        if not _meta_only(exc):
            raise _error(problem, "Model", shape, _describe(exc)) from None


@contextmanager
def _on_meta() -> Iterator[None]:
    """Factory calls default to the meta device; the caller's random state is left as it was."""
    with torch.random.fork_rng(devices=[]), torch.device("meta"), torch.no_grad():
        yield


def _meta_only(exc: Exception) -> bool:
    """True for a failure that only means "this cannot run on the meta device", or on this
    machine: a problem that puts its tensors on the GPU is checked where there is one."""
    if isinstance(exc, NotImplementedError):
        return True
    if _CUDA.search(str(exc)) and not torch.cuda.is_available():
        return True
    return isinstance(exc, (RuntimeError, TypeError)) and bool(_META.search(str(exc)))


def _describe(exc: BaseException, limit: int = 300) -> str:
    """The exception on one line (the CLI prints a SpecError as one line), cut if very long."""
    return on_one_line(f"{type(exc).__name__}: {exc}", limit)


def _parameters(fn: Callable[..., Any]) -> str:
    try:
        params = inspect.signature(fn).parameters.values()
    except ValueError:
        return "unknown arguments"
    names = [_stars(p) + p.name for p in params]
    return ", ".join(names) if names else "no arguments"


def _stars(parameter: inspect.Parameter) -> str:
    """The `*` or `**` a signature writes before a variadic parameter."""
    if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
        return "*"
    return "**" if parameter.kind is inspect.Parameter.VAR_KEYWORD else ""


def _error(problem: Problem, function: str, shape: Shape, what: str) -> SpecError:
    params = ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in shape.params.items())
    return SpecError(problem.reference, function, f"shape '{shape.name}' ({params}): {what}")
