"""The engine of :mod:`tileblas.rblas`: one table entry per BLAS routine, and the generic forward/reverse.

Design note.  A :class:`Spec` describes a routine once, against the ``scipy.linalg.blas`` signature that
``tileblas.blas`` reproduces: its parameter names and defaults, which arguments it may overwrite in place
(and under which ``overwrite_*`` flag), what it returns, its inverse computation (a list of
``tileblas.blas`` calls that run in place on the outputs), when that inverse is impossible or unsafe, and
its cost.  :func:`make_pair` turns a spec and a precision into the ``f``/``r`` functions.  The engine looks
routines up on ``tileblas.blas`` at call time (:func:`lookup`), so it follows whatever that namespace
computes with (tile runtime for Level 3, device arrays through the device layer).

In-place semantics are those of the f2py wrappers: an output argument is updated in place exactly when it
is an array of the routine's dtype, contiguous (rank 1) or Fortran-contiguous (rank 2), and its
``overwrite_*`` flag (where it has one) is true; otherwise the routine returns a fresh array, the user's
argument is untouched, and the forward call records mode ``"none"`` (nothing to undo).  The prediction is
checked against the returned array after every forward call.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from tileblas._dtypes import DTYPE_OF
from tileblas.rblas import _exact, _safety
from tileblas.rblas._modes import (
    AlreadyReversedError,
    ArgumentMismatchError,
    Decision,
    ModifiedError,
    NotForwardedError,
    OrderError,
    ReversalError,
    _check_mode,
    get_default_mode,
    get_policy,
)
from tileblas.rblas._fingerprint import address, fingerprint, identity, is_array, shares_memory
from tileblas.rblas._journal import Record, _pop, _push, journal, tape_mode

__all__ = ["Spec", "Out", "Ctx", "make_pair", "signature_params", "lookup", "forward", "reverse", "DTYPE_OF_PREFIX"]

#: dtype of each routine prefix, including the mixed ones (csscal, zdrot, ...).
DTYPE_OF_PREFIX = {**DTYPE_OF, "cs": DTYPE_OF["c"], "zd": DTYPE_OF["z"]}


_IMMUTABLE = (bool, int, float, complex, str, bytes, np.number)


def _blas_namespace() -> Any:
    mod = sys.modules.get("tileblas.blas")
    return mod if mod is not None else importlib.import_module("tileblas.blas")


def lookup(name: str) -> Callable[..., Any]:
    """The ``tileblas.blas`` routine ``name``, looked up at call time."""
    fn = getattr(_blas_namespace(), name, None)
    if fn is None:
        raise NotImplementedError(f"tileblas.blas has no routine {name!r} (yet); rblas cannot call it")
    return fn


# ------------------------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Out:
    """An argument the routine may overwrite in place."""

    name: str
    flag: str | None = None      # overwrite_* flag that must be true for in-place update
    ndim: int = 1


@dataclass
class Ctx:
    """What the per-routine functions of a :class:`Spec` see."""

    spec: "Spec"
    prefix: str
    dtype: np.dtype
    bound: dict[str, Any]

    def get(self, name: str) -> Any:
        if name in self.bound:
            return self.bound[name]
        return self.spec.defaults.get(name)

    def name(self, routine: str | None = None) -> str:
        return self.prefix + (routine or self.spec.routine)

    @property
    def real(self) -> np.dtype:
        return np.dtype(self.dtype.char.lower()) if self.dtype.kind == "c" else self.dtype

    @property
    def is_complex(self) -> bool:
        return self.dtype.kind == "c"

    def call(self, routine: str | None = None, outs: tuple[str, ...] | None = None, **changes: Any) -> tuple:
        """An inverse step: the user's arguments with ``changes``, on routine ``routine``."""
        kw = dict(self.bound)
        kw.update(changes)
        return (self.name(routine), kw, outs or tuple(o.name for o in self.spec.outputs))


@dataclass
class Spec:
    """One BLAS routine with side effects.

    Attributes
    ----------
    routine : str
        Name without precision prefix ('axpy').
    level : int
        BLAS level (1, 2, 3); ``group`` is the paper's Level-2 group (1, 2, 3) where it applies.
    prefixes : tuple of str
        Precisions (including 'cs'/'zd' for csscal/zdscal, csrot/zdrot).
    params : tuple of str
        The scipy.linalg.blas parameter names in order; ``nreq`` of them are required.
    defaults : dict
        Defaults of optional scalar parameters.
    outputs : tuple of Out
        Arguments the routine may overwrite in place.
    returns : tuple of str
        For each returned value, the argument whose storage it uses.
    inverse : callable or None
        ``inverse(ctx) -> list of steps``, each ``(routine, kwargs, outputs)`` (a tileblas.blas call
        running in place on the outputs) or a callable ``step(ctx)``; None: no inverse exists.
    impossible, unsafe : callable
        ``f(ctx) -> reason or None``: when the inverse does not exist / is numerically unsafe.
    cost : callable
        ``cost(ctx) -> (flops, bytes)`` of the inverse computation.
    hermdiag : str or None
        'full' or 'packed' when the routine zeroes the imaginary part of a Hermitian diagonal.
    guard : str or None
        How a compute-mode forward call keeps its inverse safe from Inf and NaN (``_safety.GUARDS``:
        'chunks', 'vector', 'scan', None); see :mod:`tileblas.rblas._safety`.
    """

    routine: str
    level: int
    prefixes: tuple[str, ...]
    params: tuple[str, ...]
    nreq: int
    defaults: dict[str, Any]
    outputs: tuple[Out, ...]
    returns: tuple[str, ...]
    inverse: Callable[[Ctx], list] | None
    impossible: Callable[[Ctx], str | None] = lambda ctx: None
    unsafe: Callable[[Ctx], str | None] = lambda ctx: None
    cost: Callable[[Ctx], tuple[float, float]] = lambda ctx: (0.0, 0.0)
    hermdiag: str | None = None
    guard: str | None = "scan"
    group: int = 0
    doc: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------- helpers
def bind(spec: Spec, fullname: str, args: tuple, kwargs: dict) -> dict[str, Any]:
    if len(args) > len(spec.params):
        raise TypeError(f"{fullname}() takes at most {len(spec.params)} arguments ({len(args)} given)")
    bound = dict(zip(spec.params, args))
    for k, v in kwargs.items():
        if k not in spec.params:
            raise TypeError(f"{fullname}() got an unexpected keyword argument {k!r}")
        if k in bound:
            raise TypeError(f"{fullname}() got multiple values for argument {k!r}")
        bound[k] = v
    missing = [p for p in spec.params[: spec.nreq] if p not in bound]
    if missing:
        raise TypeError(f"{fullname}() missing required argument(s): {', '.join(map(repr, missing))}")
    return bound


def make_key(spec: Spec, fullname: str, bound: dict[str, Any]) -> tuple:
    full = {**spec.defaults, **bound}
    return (fullname, tuple((n, identity(full[n])) for n in sorted(full)))


def _predicts_inplace(v: Any, out: Out, ctx: Ctx) -> bool:
    if not is_array(v):
        return False
    if out.flag is not None and not ctx.get(out.flag):
        return False
    if v.dtype != ctx.dtype or v.ndim != out.ndim:
        return False
    flags = v.flags
    return bool(flags.c_contiguous if out.ndim == 1 else flags.f_contiguous)


def _nbytes(v: Any) -> int:
    return int(v.nbytes)


def _copy(v: Any) -> Any:
    return v.copy(order="K") if isinstance(v, np.ndarray) else v.copy()


def _aligned_copy(v: np.ndarray) -> np.ndarray:
    """A copy whose first element has the same address modulo 64 as ``v``'s (same kernel code paths)."""
    if not isinstance(v, np.ndarray):
        return v.copy()
    order = "F" if (v.flags.f_contiguous and not v.flags.c_contiguous) else "C"
    raw = np.empty(v.nbytes + 128, dtype=np.uint8)
    shift = (address(v) - address(raw)) % 64
    buf = raw[shift: shift + v.nbytes].view(v.dtype)
    out = buf.reshape(v.shape, order=order)
    out[...] = v
    return out


def _sharing(bound: dict[str, Any], outs: list[str], arrays: list[tuple[str, Any]]) -> list[tuple[str, str]]:
    """(output, argument) pairs where an output the call writes in place may share memory with another
    array argument (an input, or another output)."""
    pairs = []
    for o in outs:
        ov = bound[o]
        for n, v in arrays:
            if n != o and shares_memory(ov, v):
                pairs.append((o, n))
    return pairs


def _aliases(pairs: list[tuple[str, str]]) -> str | None:
    """Why the outputs cannot be inverted in place because they share memory with other arguments, or None."""
    if not pairs:
        return None
    return "; ".join(f"output {o!r} shares memory with argument {n!r}" for o, n in pairs)


def _hermdiag_index(ctx: Ctx, name: str) -> Any:
    v = ctx.bound[name]
    if ctx.spec.hermdiag == "full":
        n = min(v.shape)
        return (np.arange(n), np.arange(n))
    n = int(ctx.get("n"))
    j = np.arange(n)
    if ctx.get("lower"):
        return (j * n - j * (j - 1) // 2,)
    return (j * (j + 3) // 2,)


def _save_hermdiag(ctx: Ctx, outs: list[str]) -> dict[str, Any]:
    saved = {}
    for o in outs:
        idx = _hermdiag_index(ctx, o)
        im = ctx.bound[o][idx].imag
        if bool((im != 0).any()):
            saved[o] = (idx, im.copy())
    return saved


# ------------------------------------------------------------------------------------------- decide
def _decide(ctx: Ctx, requested: str, outs: list[str],
            pairs: list[tuple[str, str]] | None = None) -> tuple[str, str, dict[str, float]]:
    """(mode, reason, cost estimates) of a forward call; ``pairs``: the outputs sharing memory with other
    arguments (:func:`_sharing`), which only a checkpoint reverses."""
    spec = ctx.spec
    if not outs:
        return "none", "no argument is updated in place (the routine returns a fresh array)", {}
    impossible = None
    if spec.inverse is None:
        impossible = "destructive routine: the overwritten values are not a function of the new ones"
    elif len(outs) != len(spec.outputs):
        impossible = "only some outputs are updated in place"
    else:
        if pairs is None:
            pairs = _sharing(ctx.bound, outs, [(n, v) for n, v in ctx.bound.items() if is_array(v)])
        impossible = _aliases(pairs) or spec.impossible(ctx)
    if requested == "checkpoint":
        return "checkpoint", "requested", {}
    if impossible:
        return "checkpoint", f"inverse computation impossible: {impossible}", {}
    if requested == "compute":
        return "compute", "requested; inverse computation exists", {}
    if requested == "exact":
        return "exact", "requested; inverse computation plus rounding residual", {}
    unsafe = spec.unsafe(ctx)
    if unsafe:
        return "checkpoint", f"inverse computation unsafe: {unsafe}", {}
    pol = get_policy()
    ob = sum(_nbytes(ctx.bound[o]) for o in outs)
    flops, nbytes = spec.cost(ctx)
    if ctx.is_complex:
        flops *= 4
    w = pol.reverse_weight
    cp = 2 * ob / pol.bandwidth * (1 + w)
    rc = w * max(flops / pol.flop_rate, nbytes / pol.bandwidth)
    est = {"checkpoint_s": cp, "compute_s": rc}
    if ob > pol.max_checkpoint_bytes:
        return "compute", f"checkpoint of {ob} B exceeds max_checkpoint_bytes; inverse is safe", est
    if rc <= cp:
        return "compute", f"inverse computation estimated cheaper ({rc:.2e} s vs {cp:.2e} s)", est
    return "checkpoint", f"checkpointing estimated cheaper ({cp:.2e} s vs {rc:.2e} s)", est


# ------------------------------------------------------------------------------------------- run inverse
def _run_inverse(ctx: Ctx, targets: dict[str, Any] | None = None) -> None:
    """Run the inverse computation in place on the outputs (or on ``targets`` standing in for them)."""
    if targets:
        ctx = Ctx(ctx.spec, ctx.prefix, ctx.dtype, {**ctx.bound, **targets})
    for step in ctx.spec.inverse(ctx):
        if callable(step):  # an inverse step written with array operations (copy's zero-fill)
            step(ctx)
            continue
        name, kw, outs = step
        ret = lookup(name)(**kw)
        rets = ret if isinstance(ret, tuple) else (ret,)
        for o, r in zip(outs, rets):
            tgt = kw[o]
            if r is not tgt and (not is_array(r) or address(r) != address(tgt)):
                tgt[...] = r


# ------------------------------------------------------------------------------------------- forward
def forward(spec: Spec, prefix: str, args: tuple, kwargs: dict, mode: str | None) -> Any:
    """The forward call: decide, save what the chosen mode needs, call ``tileblas.blas``, record.

    In compute mode the work besides the call itself is O(1) in the size of the operands: binding the
    arguments once, the in-place prediction (dtype, rank, contiguity flags), the inverse's conditions
    (scalars; a triangle's diagonal), an address-range overlap test per array pair, and fingerprints of
    at most ~64 elements per array; the non-finite safety is the guard's (:mod:`tileblas.rblas._safety`:
    in the same pass as the call for Level 1 and ger, on the output vector for Level 2, on the operands
    for Level 3, whose work is O(n) times theirs).  As much of it as possible runs
    before the call: a large BLAS call streams its operands through the caches and leaves them cold for
    the Python code that follows it (measured: the same bookkeeping costs several times more after a
    10^7-element axpy than before it), so after the call come only the check that the outputs were
    updated in place, the fingerprints of the outputs and the push of the prepared record.
    """
    fullname = prefix + spec.routine
    fn = lookup(fullname)
    bound = bind(spec, fullname, args, kwargs)
    requested = _check_mode(mode) if mode is not None else (tape_mode() or get_default_mode())
    ctx = Ctx(spec, prefix, DTYPE_OF_PREFIX[prefix], bound)
    # one pass over the arguments: the arrays (aliasing test, fingerprints) and whether every other
    # argument is immutable (then the matching key can wait until the reverse call)
    arrays: list[tuple[str, Any]] = []
    lazy = True
    for n, v in bound.items():
        if is_array(v):
            arrays.append((n, v))
        elif lazy and v is not None and not isinstance(v, _IMMUTABLE):
            lazy = False
    outs = [o.name for o in spec.outputs if _predicts_inplace(bound.get(o.name), o, ctx)]
    predicted = tuple(outs)
    # outputs sharing memory with other arguments: only a checkpoint of the outputs reverses such a call (the
    # inverse would read what the call wrote), and those arguments change with the outputs, so they are
    # fingerprinted after the call
    pairs = _sharing(bound, outs, arrays) if outs else []
    shared = {n for _, n in pairs if n not in predicted}
    chosen, reason, est = _decide(ctx, requested, outs, pairs)
    guard = j = None
    if chosen == "compute":
        guard = _safety.prepare(spec, prefix, ctx.dtype, bound, outs, arrays)
        if guard.checkpoint:  # the inverse would write NaN or Inf into the outputs
            chosen = "checkpoint"
            reason = (f"non-finite input ({guard.checkpoint}): the inverse could not restore the outputs; "
                      "checkpointed")
            guard = None
    if chosen == "exact" and not all(isinstance(bound[o], np.ndarray) for o in outs):
        chosen, reason = "checkpoint", "exact mode works on host (NumPy) arrays; checkpointed instead"
    ckpt_bytes = 0
    for o in outs:
        ckpt_bytes += _nbytes(bound[o])
    state: dict[str, Any] = {}
    saved = {o: _copy(bound[o]) for o in outs} if chosen in ("checkpoint", "exact") else {}
    pre: dict[str, bytes] = {}
    dec: Decision | None = None
    if chosen == "compute":
        if spec.hermdiag:
            state["hermdiag"] = _save_hermdiag(ctx, outs)
        # the pre-call fingerprints serve only to refresh older live records that hold an output
        # (_refresh_prints); with no live record on this thread's journal there is none to refresh
        j = journal()
        if j.stack:
            pre = {o: fingerprint(bound[o]) for o in outs}
        extra = sum(im.nbytes for _, im in state["hermdiag"].values()) if spec.hermdiag else 0
        dec = Decision(fullname, requested, chosen, reason, int(extra), int(ckpt_bytes), est)
    # arguments the call does not write are fingerprinted before it
    later = guard.deferred if guard is not None else ()
    prints = {n: fingerprint(v) for n, v in arrays if n not in predicted and n not in shared and n not in later}
    # the key is computed at reverse time (arrays keep their identity), except where an argument is a
    # mutable non-array object (a list param): then now
    if lazy:
        key: Any = lambda: make_key(spec, fullname, bound)  # noqa: E731
        rbound = bound
    else:  # keep a copy of mutable non-array arguments: the inverse must use what the forward call saw
        key = make_key(spec, fullname, bound)
        rbound = {k: (v if v is None or isinstance(v, _IMMUTABLE) or is_array(v) else copy.deepcopy(v))
                  for k, v in bound.items()}
    rec = Record(fullname, spec, prefix, rbound, key, dec, state, predicted, prints)

    try:
        ret = fn(*args, **kwargs) if guard is None else guard.run(lambda: fn(*args, **kwargs))
    except BaseException as exc:
        # a failed call records nothing; where a checkpoint was taken the outputs get their values back
        # (a tiled Level-3 call can fail after writing some tiles), else the error says what may be lost
        if saved:
            for o, v in saved.items():
                bound[o][...] = v
        elif outs and isinstance(exc, Exception):
            exc.add_note(f"f{fullname} ({chosen} mode, nothing recorded): {', '.join(map(repr, outs))} "
                         "may be partly written; mode='checkpoint' restores the outputs of a failed call")
        raise

    rets = ret if isinstance(ret, tuple) else (ret,)
    for rname, r in zip(spec.returns, rets):
        v = bound.get(rname)
        if r is v:
            actual = True
        elif not is_array(v):
            continue
        else:
            actual = is_array(r) and address(r) == address(v) and r.shape == v.shape
        if rname in outs and not actual:
            outs.remove(rname)
            saved.pop(rname, None)
        elif actual and rname not in outs:
            raise RuntimeError(
                f"{fullname} updated {rname!r} in place although scipy's semantics say it copies; the "
                "call cannot be reversed (report this as a tileblas.blas bug)")
    got = guard.prints if guard is not None else {}
    for o in (*predicted, *shared, *later):
        if o not in prints:
            fp = got.get(o)
            prints[o] = fp if fp is not None else fingerprint(bound[o])
    if guard is not None:
        what, data, why = guard.after()
        if what == "checkpoint":  # the outputs' values from before the call become its checkpoint
            chosen, reason = "checkpoint", why
            saved = {o: v for o, v in data.items() if o in outs}
            state.pop("hermdiag", None)
        elif what == "kept":
            state["kept"] = data
            nb = sum(v.nbytes for _, _, v in data)
            n_el = sum(v.size for _, _, v in data)
            dec = Decision(fullname, requested, chosen,
                           f"{reason}; {n_el} elements held a non-finite value after the call (an Inf or a NaN "
                           "in an input, or an overflow): their values are kept and restored as they were",
                           dec.extra_bytes + int(nb), dec.checkpoint_bytes, est)
            rec.decision = dec
        elif what == "irreversible":
            state["irreversible"] = f"r{fullname}: {why}"
    if len(outs) != len(predicted) or chosen != "compute":
        dec = None
        if not outs:
            chosen, reason, state, saved = "none", "no argument was updated in place (fresh array returned)", {}, {}
        elif chosen == "exact":
            work = {o: _aligned_copy(bound[o]) for o in outs}
            _run_inverse(ctx, work)
            res = {o: _exact.encode(_exact.real_flat(saved[o]), _exact.real_flat(work[o])) for o in outs}
            del work
            rbytes = sum(r.nbytes for r in res.values())
            if rbytes < ckpt_bytes:
                state["residual"] = res
                if spec.level == 3:
                    state["runtime"] = _runtime_key()
                saved = {}
                nexc = sum(r.exc_idx.size for r in res.values())
                reason += f" ({', '.join(r.kind for r in res.values())}, {nexc} raw values)"
            else:
                chosen = "checkpoint"
                reason = f"exact residual ({rbytes} B) would not be smaller than a checkpoint; checkpointed"
        if saved:
            state["saved"] = saved
        extra = sum(v.nbytes for v in saved.values())
        extra += sum(r.nbytes for r in state.get("residual", {}).values())
        extra += sum(im.nbytes for _, im in state.get("hermdiag", {}).values())
        rec.decision = Decision(fullname, requested, chosen, reason, int(extra), int(ckpt_bytes), est)
        rec.state = state
        rec.inplace = tuple(outs)
    if pre:
        rec.pre_prints = pre if len(outs) == len(pre) else {o: fp for o, fp in pre.items() if o in outs}
    _push(rec, j)
    return ret


# ------------------------------------------------------------------------------------------- reverse
def _describe_diff(spec: Spec, rec: Record, bound: dict[str, Any]) -> str:
    a = dict(rec.key[1])
    b = dict(make_key(spec, rec.routine, bound)[1])
    diffs = [n for n in spec.params if a.get(n) != b.get(n)]
    return ", ".join(repr(d) for d in diffs) or "(none)"


def _match(spec: Spec, fullname: str, bound: dict[str, Any]) -> Record:
    j = journal()
    key = make_key(spec, fullname, bound)
    stack = j.stack
    if stack and stack[-1].key == key:
        return stack[-1]
    for rec in reversed(stack[:-1]):
        if rec.key == key:
            raise OrderError(
                f"r{fullname}: out of LIFO order; the most recent live forward call is "
                f"{stack[-1].describe()}; reverse it first")
    if key in j.reversed:
        raise AlreadyReversedError(f"r{fullname}: this forward call was already reversed")
    if stack and stack[-1].routine == fullname:
        raise ArgumentMismatchError(
            f"r{fullname}: arguments differ from the most recent forward call "
            f"{stack[-1].describe()}: {_describe_diff(spec, stack[-1], bound)}")
    if not stack:
        raise NotForwardedError(
            f"r{fullname}: no forward call to reverse on this thread (never run forward with f{fullname}?)")
    raise NotForwardedError(
        f"r{fullname}: no live forward call matches; the most recent live forward call is "
        f"{stack[-1].describe()}")


def _runtime_key() -> tuple:
    """The configuration of the current tile runtime that decides the bits of a Level-3 result."""
    from tileblas.runtime import get_runtime

    rt = get_runtime()
    return (tuple(d.name for d in rt.devices), rt.tile_size, rt.deterministic, rt.small_flops,
            rt.memory_policy)


def _restore_record(rec: Record) -> None:
    if "irreversible" in rec.state:
        _pop(rec)
        raise ReversalError(
            rec.state["irreversible"] + "; the call was dropped from the journal, data untouched")
    for name, fp in rec.prints.items():
        if fingerprint(rec.bound[name]) != fp:
            raise ModifiedError(
                f"r{rec.routine}: argument {name!r} was modified after the forward call (fingerprint "
                "mismatch); refusing to reverse")
    mode = rec.decision.mode
    if mode == "exact" and "runtime" in rec.state and _runtime_key() != rec.state["runtime"]:
        raise ArgumentMismatchError(
            f"r{rec.routine}: an exact-mode Level-3 restore must run on a tile runtime configured like the "
            f"one of its forward call (devices, tile_size, deterministic: {rec.state['runtime'][:3]}; now "
            f"{_runtime_key()[:3]}), or the inverse would not reproduce its bits; reverse it inside the "
            "same `with tileblas.Runtime(...)` block")
    ctx = Ctx(rec.spec, rec.prefix, DTYPE_OF_PREFIX[rec.prefix], rec.bound)
    try:
        if mode == "checkpoint":
            for n, v in rec.state["saved"].items():
                rec.bound[n][...] = v
        elif mode == "compute":
            _run_inverse(ctx)
            for n, (idx, im) in rec.state.get("hermdiag", {}).items():
                out = rec.bound[n]
                out[idx] = out[idx].real + 1j * im
            for n, idx, vals in rec.state.get("kept", ()):  # elements the inverse cannot restore
                rec.bound[n][idx] = vals
        elif mode == "exact":
            _run_inverse(ctx)
            for n, res in rec.state["residual"].items():
                _exact.decode_into(res, _exact.real_flat(rec.bound[n]), n)
    finally:
        _pop(rec)
    if mode == "compute":
        _refresh_prints(rec)


def _refresh_prints(rec: Record) -> None:
    """After an inverse computation (accurate, not bit-exact), the records that expect the pre-forward
    state of a restored array get the restored array's fingerprint, so that chained reversals work."""
    for o, old_fp in rec.pre_prints.items():
        arr = rec.bound[o]
        ident = identity(arr)
        new_fp = fingerprint(arr)
        for r2 in (rec.journal or journal()).stack:
            for n, v in r2.bound.items():
                if n in r2.prints and is_array(v) and r2.prints[n] == old_fp and identity(v) == ident:
                    r2.prints[n] = new_fp


def reverse(spec: Spec, prefix: str, args: tuple, kwargs: dict) -> Any:
    fullname = prefix + spec.routine
    bound = bind(spec, fullname, args, kwargs)
    rec = _match(spec, fullname, bound)
    _restore_record(rec)
    vals = tuple(bound.get(r) for r in spec.returns)
    return vals if len(vals) > 1 else vals[0]


# ------------------------------------------------------------------------------------------- pairs
def signature_params(spec: Spec) -> list[inspect.Parameter]:
    """The parameters of the ``tileblas.blas`` routine as the spec states them (positional-or-keyword;
    required ones first, the others defaulting to the spec's default, else None)."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    out = []
    for i, name in enumerate(spec.params):
        if i < spec.nreq:
            out.append(inspect.Parameter(name, kind))
        else:
            out.append(inspect.Parameter(name, kind, default=spec.defaults.get(name)))
    return out


def make_pair(spec: Spec, prefix: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The forward and reverse functions of ``prefix + spec.routine``."""
    name = prefix + spec.routine
    sig = f"{', '.join(spec.params[:spec.nreq])}" + (
        f", [{', '.join(spec.params[spec.nreq:])}]" if len(spec.params) > spec.nreq else "")

    def fwd(*args: Any, mode: str | None = None, **kwargs: Any) -> Any:
        return forward(spec, prefix, args, kwargs, mode)

    def rev(*args: Any, **kwargs: Any) -> Any:
        return reverse(spec, prefix, args, kwargs)

    fwd.__name__ = fwd.__qualname__ = "f" + name
    rev.__name__ = rev.__qualname__ = "r" + name
    params = signature_params(spec)
    rev.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    fwd.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [*params, inspect.Parameter("mode", inspect.Parameter.KEYWORD_ONLY, default=None)])
    fwd.__module__ = rev.__module__ = "tileblas.rblas"
    fwd.__doc__ = (
        f"Forward {name}: ``f{name}({sig}, mode=None)``.\n\n"
        f"Calls ``tileblas.blas.{name}`` with exactly these arguments and returns what it returns, after\n"
        f"recording what :func:`r{name}` needs to restore every argument it updates in place.\n"
        f"{spec.doc}\n\n"
        "Parameters\n----------\n*args, **kwargs\n    The arguments of ``tileblas.blas." + name + "``.\n"
        "mode : {'checkpoint', 'compute', 'auto', 'exact'}, optional\n"
        "    Overrides the active Tape's mode and the process default.\n")
    rev.__doc__ = (
        f"Reverse {name}: ``r{name}({sig})``.\n\n"
        f"Undoes the most recent live forward call ``f{name}`` made with the same arguments on this\n"
        "thread: every argument it updated in place gets its pre-forward value back.  Returns the\n"
        "arguments in the positions of the forward call's return values (restored; untouched where the\n"
        "forward call returned a fresh array; None where the argument was not given).\n")
    return fwd, rev
