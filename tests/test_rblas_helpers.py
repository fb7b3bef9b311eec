"""Shared helpers of the rblas tests: argument builders for every routine, and the scipy fallback."""

from __future__ import annotations

import numpy as np

DT = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128,
      "cs": np.complex64, "zd": np.complex128}
N = 6
# (routine, param) whose scalar is real even in complex precision
REAL_SCALARS = {("her", "alpha"), ("hpr", "alpha"), ("herk", "alpha"), ("herk", "beta"),
                ("her2k", "beta"), ("rot", "c"), ("rot", "s")}


class BlasNS:
    """tileblas.blas, falling back to scipy.linalg.blas for names that have not landed yet."""

    def __getattr__(self, name):
        import scipy.linalg.blas as sb

        import tileblas.blas as tb

        f = getattr(tb, name, None)
        return f if f is not None else getattr(sb, name)


def vec(rng, dt, n=N, lo=1.0):
    v = lo + rng.random(n)
    if np.dtype(dt).kind == "c":
        v = v + 1j * (lo + rng.random(n))
    return v.astype(dt)


def mat(rng, dt, m=N, n=N):
    a = rng.random((m, n))
    if np.dtype(dt).kind == "c":
        a = a + 1j * rng.random((m, n))
    return np.asfortranarray(a.astype(dt))


def scalar(routine, param, prefix, value):
    if prefix in ("s", "d") or (routine, param) in REAL_SCALARS or (prefix in ("cs", "zd") and param == "a"):
        return float(value)
    return complex(value, 0.25 * value)


def tri(rng, dt, n=N):
    """A well-conditioned upper triangle (unit-ish diagonal dominance)."""
    a = np.triu(mat(rng, dt, n, n)) * 0.3
    a[np.diag_indices(n)] = 2.0 + rng.random(n)
    return np.asfortranarray(a)


def packed(a, lower=False):
    n = a.shape[0]
    if lower:
        return np.concatenate([a[j:, j] for j in range(n)])
    return np.concatenate([a[: j + 1, j] for j in range(n)])


def band_upper(a, k):
    n = a.shape[0]
    b = np.zeros((k + 1, n), dtype=a.dtype)
    for j in range(n):
        for i in range(max(0, j - k), j + 1):
            b[k + i - j, j] = a[i, j]
    return np.asfortranarray(b)


def build(routine, prefix, rng):
    """(args, kwargs) for an in-place call of ``prefix+routine`` on well-conditioned data."""
    dt = DT[prefix]
    S = lambda p, v: scalar(routine, p, prefix, v)  # noqa: E731
    x, y = vec(rng, dt), vec(rng, dt)
    if routine in ("copy", "swap"):
        return (x, y), {}
    if routine == "scal":
        return (S("a", 1.7), x), ({"overwrite_x": 1} if prefix in ("cs", "zd") else {})
    if routine == "axpy":
        return (x, y), {"a": S("a", 1.3)}
    if routine == "rot":
        return (x, y, 0.6, 0.8), {"overwrite_x": 1, "overwrite_y": 1}
    if routine == "rotm":
        p = np.array([-1.0, 1.1, 0.2, 0.3, 0.9], dtype=dt)
        return (x, y, p), {"overwrite_x": 1, "overwrite_y": 1}
    g1 = {"beta": S("beta", 0.7), "y": y, "overwrite_y": 1}
    if routine in ("gemv", "symv", "hemv"):
        a = mat(rng, dt)
        a = np.asfortranarray(a + a.conj().T if routine == "hemv" else (a + a.T if routine == "symv" else a))
        return (S("alpha", 1.2), a, x), g1
    if routine == "gbmv":
        a = mat(rng, dt, 3, N)
        return (N, N, 1, 1, S("alpha", 1.2), a, x), g1
    if routine in ("hbmv", "sbmv"):
        a = mat(rng, dt, 2, N)
        return (1, S("alpha", 1.2), a, x), g1
    if routine in ("hpmv", "spmv"):
        ap = vec(rng, dt, N * (N + 1) // 2)
        return (N, S("alpha", 1.2), ap, x), g1
    if routine in ("trmv", "trsv"):
        return (tri(rng, dt), x), {"overwrite_x": 1}
    if routine in ("tbmv", "tbsv"):
        return (1, band_upper(tri(rng, dt), 1), x), {"overwrite_x": 1}
    if routine in ("tpmv", "tpsv"):
        return (N, packed(tri(rng, dt)), x), {"overwrite_x": 1}
    if routine in ("ger", "geru", "gerc"):
        return (S("alpha", 0.9), x, y), {"a": mat(rng, dt), "overwrite_a": 1}
    if routine in ("her", "syr"):
        return (S("alpha", 0.9), x), {"a": mat(rng, dt), "overwrite_a": 1}
    if routine in ("her2", "syr2"):
        return (S("alpha", 0.9), x, y), {"a": mat(rng, dt), "overwrite_a": 1}
    if routine in ("hpr", "spr"):
        return (N, S("alpha", 0.9), x, vec(rng, dt, N * (N + 1) // 2)), {"overwrite_ap": 1}
    if routine in ("hpr2", "spr2"):
        return (N, S("alpha", 0.9), x, y, vec(rng, dt, N * (N + 1) // 2)), {"overwrite_ap": 1}
    l3 = {"beta": S("beta", 0.8), "c": mat(rng, dt), "overwrite_c": 1}
    if routine in ("gemm", "symm", "hemm", "syr2k", "her2k"):
        return (S("alpha", 1.1), mat(rng, dt), mat(rng, dt)), l3
    if routine in ("syrk", "herk"):
        return (S("alpha", 1.1), mat(rng, dt)), l3
    if routine in ("trmm", "trsm"):
        return (S("alpha", 1.5), tri(rng, dt), mat(rng, dt)), {"overwrite_b": 1}
    raise KeyError(routine)


def snapshot(args, kwargs):
    return [np.array(v, copy=True) if isinstance(v, np.ndarray) else v for v in (*args, *kwargs.values())]


def arrays(args, kwargs):
    return [v for v in (*args, *kwargs.values()) if isinstance(v, np.ndarray)]


def tol(prefix):
    return 2e-4 if prefix in ("s", "c", "cs") else 1e-10
