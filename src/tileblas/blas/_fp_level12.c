/*
 * Level 1/2 of the small-call path (tileblas.blas._fastpath; _fp.h has the plan of the files).
 *
 * Level12(kind, prefix, address): the small-call path of one Level-1/2 routine of tileblas.blas, called
 * with all the routine's arguments positionally.  It handles the calls the Python fast paths of
 * tileblas.blas._level1 / _level2 handle (default n, offsets 0, increments 1, operands of the routine's
 * dtype that BLAS can take as they are), with the same results, and returns NotImplemented for everything
 * else.  The BLAS instance is the one the Python code uses (``address`` is its entry point).
 * small.front(fallback, names, defaults) is the public routine: the same path with a front, as Level3's.
 *
 * Each kind's parameters are declared once, in SIG12 (where each sits in SciPy's signature, and which
 * defaults the path requires); a call is checked against those defaults (defaults_hold), then run by the
 * function of its group.  Above the configuration's gil_elements elements a call runs without the GIL.
 */
#include "_fp.h"

enum { AXPY, SCAL, COPY, SWAP, DOT, DOTU, DOTC, NRM2, ASUM, IAMAX, GEMV, SYMV, HEMV, TRMV, TRSV, GER, GERU,
       GERC, SYR, HER, SYR2, HER2, ROT, ROTM, RSCAL, ROTG, ROTMG, GBMV, SBMV, HBMV, SPMV, HPMV, TBMV, TBSV,
       TPMV, TPSV, SPR, HPR, SPR2, HPR2, NKIND };
static const char *const KIND[NKIND] = {"axpy", "scal", "copy", "swap", "dot", "dotu", "dotc", "nrm2", "asum",
                                        "iamax", "gemv", "symv", "hemv", "trmv", "trsv", "ger", "geru", "gerc",
                                        "syr", "her", "syr2", "her2", "rot", "rotm", "rscal", "rotg", "rotmg",
                                        "gbmv", "sbmv", "hbmv", "spmv", "hpmv", "tbmv", "tbsv", "tpmv", "tpsv",
                                        "spr", "hpr", "spr2", "hpr2"};

/* Where each parameter of a kind sits in its argument list (-1: none), declared once per kind as its
 * signature (SciPy's order), and the defaults the path requires: none[] must be None (n, an output not
 * given), zero[] 0 (offsets), one[] 1 (increments).  size: the first size argument (gbmv: m, n, kl, ku
 * from there); alpha/beta: the scalars (rot: c, s; rotg: a, b; rotmg: d1, d2, with x1, y1 at x, y);
 * a: the matrix, band or packed operand (rotm: param); ow, ow2: overwrite flags. */
typedef struct {
    const char *signature;
    signed char nargs, none[2], zero[2], one[2];
    signed char size, alpha, beta, x, y, a, lower, trans, diag, ow, ow2;
} Sig12;

#define NO {-1, -1}
/* clang-format off */
static const Sig12 SIG12[NKIND] = {
    /*                                                                   nargs none     zero    one     sz al be  x  y  a lo tr dg ow ow2 */
    [AXPY]  = {"axpy(x, y, n, a, offx, incx, offy, incy)",                   8, {2,-1}, {4, 6}, {5, 7}, -1, 3,-1, 0, 1,-1,-1,-1,-1,-1,-1},
    [SCAL]  = {"scal(a, x, n, offx, incx)",                                  5, {2,-1}, {3,-1}, {4,-1}, -1, 0,-1, 1,-1,-1,-1,-1,-1,-1,-1},
    [COPY]  = {"copy(x, y, n, offx, incx, offy, incy)",                      7, {2,-1}, {3, 5}, {4, 6}, -1,-1,-1, 0, 1,-1,-1,-1,-1,-1,-1},
    [SWAP]  = {"swap(x, y, n, offx, incx, offy, incy)",                      7, {2,-1}, {3, 5}, {4, 6}, -1,-1,-1, 0, 1,-1,-1,-1,-1,-1,-1},
    [DOT]   = {"dot(x, y, n, offx, incx, offy, incy)",                       7, {2,-1}, {3, 5}, {4, 6}, -1,-1,-1, 0, 1,-1,-1,-1,-1,-1,-1},
    [DOTU]  = {"dotu(x, y, n, offx, incx, offy, incy)",                      7, {2,-1}, {3, 5}, {4, 6}, -1,-1,-1, 0, 1,-1,-1,-1,-1,-1,-1},
    [DOTC]  = {"dotc(x, y, n, offx, incx, offy, incy)",                      7, {2,-1}, {3, 5}, {4, 6}, -1,-1,-1, 0, 1,-1,-1,-1,-1,-1,-1},
    [NRM2]  = {"nrm2(x, n, offx, incx)",                                     4, {1,-1}, {2,-1}, {3,-1}, -1,-1,-1, 0,-1,-1,-1,-1,-1,-1,-1},
    [ASUM]  = {"asum(x, n, offx, incx)",                                     4, {1,-1}, {2,-1}, {3,-1}, -1,-1,-1, 0,-1,-1,-1,-1,-1,-1,-1},
    [IAMAX] = {"iamax(x, n, offx, incx)",                                    4, {1,-1}, {2,-1}, {3,-1}, -1,-1,-1, 0,-1,-1,-1,-1,-1,-1,-1},
    [GEMV]  = {"gemv(alpha, a, x, beta, y, offx, incx, offy, incy, trans, overwrite_y)",
                                                                            11, {4,-1}, {5, 7}, {6, 8}, -1, 0, 3, 2,-1, 1,-1, 9,-1,-1,-1},
    [SYMV]  = {"symv(alpha, a, x, beta, y, offx, incx, offy, incy, lower, overwrite_y)",
                                                                            11, {4,-1}, {5, 7}, {6, 8}, -1, 0, 3, 2,-1, 1, 9,-1,-1,-1,-1},
    [HEMV]  = {"hemv(alpha, a, x, beta, y, offx, incx, offy, incy, lower, overwrite_y)",
                                                                            11, {4,-1}, {5, 7}, {6, 8}, -1, 0, 3, 2,-1, 1, 9,-1,-1,-1,-1},
    [TRMV]  = {"trmv(a, x, offx, incx, lower, trans, diag, overwrite_x)",    8, NO,     {2,-1}, {3,-1}, -1,-1,-1, 1,-1, 0, 4, 5, 6, 7,-1},
    [TRSV]  = {"trsv(a, x, incx, offx, lower, trans, diag, overwrite_x)",    8, NO,     {3,-1}, {2,-1}, -1,-1,-1, 1,-1, 0, 4, 5, 6, 7,-1},
    [GER]   = {"ger(alpha, x, y, incx, incy, a, overwrite_x, overwrite_y, overwrite_a)",
                                                                             9, {5,-1}, NO,     {3, 4}, -1, 0,-1, 1, 2,-1,-1,-1,-1,-1,-1},
    [GERU]  = {"geru(alpha, x, y, incx, incy, a, overwrite_x, overwrite_y, overwrite_a)",
                                                                             9, {5,-1}, NO,     {3, 4}, -1, 0,-1, 1, 2,-1,-1,-1,-1,-1,-1},
    [GERC]  = {"gerc(alpha, x, y, incx, incy, a, overwrite_x, overwrite_y, overwrite_a)",
                                                                             9, {5,-1}, NO,     {3, 4}, -1, 0,-1, 1, 2,-1,-1,-1,-1,-1,-1},
    [SYR]   = {"syr(alpha, x, lower, incx, offx, n, a, overwrite_a)",        8, {5, 6}, {4,-1}, {3,-1}, -1, 0,-1, 1,-1,-1, 2,-1,-1,-1,-1},
    [HER]   = {"her(alpha, x, lower, incx, offx, n, a, overwrite_a)",        8, {5, 6}, {4,-1}, {3,-1}, -1, 0,-1, 1,-1,-1, 2,-1,-1,-1,-1},
    [SYR2]  = {"syr2(alpha, x, y, lower, incx, offx, incy, offy, n, a, overwrite_a)",
                                                                            11, {8, 9}, {5, 7}, {4, 6}, -1, 0,-1, 1, 2,-1, 3,-1,-1,-1,-1},
    [HER2]  = {"her2(alpha, x, y, lower, incx, offx, incy, offy, n, a, overwrite_a)",
                                                                            11, {8, 9}, {5, 7}, {4, 6}, -1, 0,-1, 1, 2,-1, 3,-1,-1,-1,-1},
    [ROT]   = {"rot(x, y, c, s, n, offx, incx, offy, incy, overwrite_x, overwrite_y)",
                                                                            11, {4,-1}, {5, 7}, {6, 8}, -1, 2, 3, 0, 1,-1,-1,-1,-1, 9,10},
    [ROTM]  = {"rotm(x, y, param, n, offx, incx, offy, incy, overwrite_x, overwrite_y)",
                                                                            10, {3,-1}, {4, 6}, {5, 7}, -1,-1,-1, 0, 1, 2,-1,-1,-1, 8, 9},
    [RSCAL] = {"rscal(a, x, n, offx, incx, overwrite_x)",                    6, {2,-1}, {3,-1}, {4,-1}, -1, 0,-1, 1,-1,-1,-1,-1,-1, 5,-1},
    [ROTG]  = {"rotg(a, b)",                                                 2, NO,     NO,     NO,     -1, 0, 1,-1,-1,-1,-1,-1,-1,-1,-1},
    [ROTMG] = {"rotmg(d1, d2, x1, y1)",                                      4, NO,     NO,     NO,     -1, 0, 1, 2, 3,-1,-1,-1,-1,-1,-1},
    [GBMV]  = {"gbmv(m, n, kl, ku, alpha, a, x, incx, offx, beta, y, incy, offy, trans, overwrite_y)",
                                                                            15, {10,-1},{8,12}, {7,11},  0, 4, 9, 6,-1, 5,-1,13,-1,-1,-1},
    [SBMV]  = {"sbmv(k, alpha, a, x, incx, offx, beta, y, incy, offy, lower, overwrite_y)",
                                                                            12, {7,-1}, {5, 9}, {4, 8},  0, 1, 6, 3,-1, 2,10,-1,-1,-1,-1},
    [HBMV]  = {"hbmv(k, alpha, a, x, incx, offx, beta, y, incy, offy, lower, overwrite_y)",
                                                                            12, {7,-1}, {5, 9}, {4, 8},  0, 1, 6, 3,-1, 2,10,-1,-1,-1,-1},
    [SPMV]  = {"spmv(n, alpha, ap, x, incx, offx, beta, y, incy, offy, lower, overwrite_y)",
                                                                            12, {7,-1}, {5, 9}, {4, 8},  0, 1, 6, 3,-1, 2,10,-1,-1,-1,-1},
    [HPMV]  = {"hpmv(n, alpha, ap, x, incx, offx, beta, y, incy, offy, lower, overwrite_y)",
                                                                            12, {7,-1}, {5, 9}, {4, 8},  0, 1, 6, 3,-1, 2,10,-1,-1,-1,-1},
    [TBMV]  = {"tbmv(k, a, x, incx, offx, lower, trans, diag, overwrite_x)", 9, NO,     {4,-1}, {3,-1},  0,-1,-1, 2,-1, 1, 5, 6, 7, 8,-1},
    [TBSV]  = {"tbsv(k, a, x, incx, offx, lower, trans, diag, overwrite_x)", 9, NO,     {4,-1}, {3,-1},  0,-1,-1, 2,-1, 1, 5, 6, 7, 8,-1},
    [TPMV]  = {"tpmv(n, ap, x, incx, offx, lower, trans, diag, overwrite_x)",9, NO,     {4,-1}, {3,-1},  0,-1,-1, 2,-1, 1, 5, 6, 7, 8,-1},
    [TPSV]  = {"tpsv(n, ap, x, incx, offx, lower, trans, diag, overwrite_x)",9, NO,     {4,-1}, {3,-1},  0,-1,-1, 2,-1, 1, 5, 6, 7, 8,-1},
    [SPR]   = {"spr(n, alpha, x, ap, incx, offx, lower, overwrite_ap)",      8, NO,     {5,-1}, {4,-1},  0, 1,-1, 2,-1, 3, 6,-1,-1, 7,-1},
    [HPR]   = {"hpr(n, alpha, x, ap, incx, offx, lower, overwrite_ap)",      8, NO,     {5,-1}, {4,-1},  0, 1,-1, 2,-1, 3, 6,-1,-1, 7,-1},
    [SPR2]  = {"spr2(n, alpha, x, y, ap, incx, offx, incy, offy, lower, overwrite_ap)",
                                                                            11, NO,     {6, 8}, {5, 7},  0, 1,-1, 2, 3, 4, 9,-1,-1,10,-1},
    [HPR2]  = {"hpr2(n, alpha, x, y, ap, incx, offx, incy, offy, lower, overwrite_ap)",
                                                                            11, NO,     {6, 8}, {5, 7},  0, 1,-1, 2, 3, 4, 9,-1,-1,10,-1},
};
/* clang-format on */
#undef NO

typedef struct {
    Routine r;
    int kind;
    int prec;
    void *fn;
} Level12Object;

/* Run the BLAS call ``stmt`` touching n elements, without the GIL above gil_elements. */
#define RUN(n, stmt) RUN_IF((n) > fp_cfg.gil_elements, stmt)

/* A vector BLAS takes as it is: an ndarray of the dtype, Fortran-contiguous (any rank, read in Fortran
 * order as f2py does), aligned; ``write``: writeable or owning its memory (f2py writes such arrays). */
static PyArrayObject *
plain_vector(PyObject *o, int prec, int write)
{
    PyArrayObject *a;
    if (!PyArray_CheckExact(o)) return NULL;
    a = (PyArrayObject *)o;
    if (PyArray_TYPE(a) != TYPENUM[prec] || !PyArray_ISNOTSWAPPED(a) || !PyArray_ISALIGNED(a)
        || !PyArray_IS_F_CONTIGUOUS(a))
        return NULL;
    if (write && !PyArray_ISWRITEABLE(a) && PyArray_BASE(a) != NULL) return NULL;
    if (PyArray_SIZE(a) > INT32_MAX) return NULL;
    return a;
}

typedef void (*axpy_t)(const int *, const void *, const void *, const int *, void *, const int *);
typedef void (*scal_t)(const int *, const void *, void *, const int *);
typedef void (*copy_t)(const int *, const void *, const int *, void *, const int *);
typedef float (*sdot_t)(const int *, const void *, const int *, const void *, const int *);
typedef double (*ddot_t)(const int *, const void *, const int *, const void *, const int *);
typedef void (*cdot_sub_t)(int, const void *, int, const void *, int, void *);
typedef float (*snrm_t)(const int *, const void *, const int *);
typedef double (*dnrm_t)(const int *, const void *, const int *);
typedef int (*iamax_t)(const int *, const void *, const int *);
typedef void (*gemv_t)(const char *, const int *, const int *, const void *, const void *, const int *,
                       const void *, const int *, const void *, void *, const int *, size_t);
typedef void (*symv_t)(const char *, const int *, const void *, const void *, const int *, const void *,
                       const int *, const void *, void *, const int *, size_t);
typedef void (*trmv_t)(const char *, const char *, const char *, const int *, const void *, const int *, void *,
                       const int *, size_t, size_t, size_t);
typedef void (*ger_t)(const int *, const int *, const void *, const void *, const int *, const void *,
                      const int *, void *, const int *);
typedef void (*syr_t)(const char *, const int *, const void *, const void *, const int *, void *, const int *,
                      size_t);
typedef void (*syr2_t)(const char *, const int *, const void *, const void *, const int *, const void *,
                       const int *, void *, const int *, size_t);

typedef void (*rot_t)(const int *, void *, const int *, void *, const int *, const void *, const void *);
typedef void (*rotm_t)(const int *, void *, const int *, void *, const int *, const void *);
typedef void (*rotg_t)(void *, void *, void *, void *);
typedef void (*rotmg_t)(void *, void *, void *, const void *, void *);
typedef void (*gbmv_t)(const char *, const int *, const int *, const int *, const int *, const void *,
                       const void *, const int *, const void *, const int *, const void *, void *, const int *,
                       size_t);
typedef void (*sbmv_t)(const char *, const int *, const int *, const void *, const void *, const int *,
                       const void *, const int *, const void *, void *, const int *, size_t);
typedef void (*spmv_t)(const char *, const int *, const void *, const void *, const void *, const int *,
                       const void *, void *, const int *, size_t);
typedef void (*tbmv_t)(const char *, const char *, const char *, const int *, const int *, const void *,
                       const int *, void *, const int *, size_t, size_t, size_t);
typedef void (*tpmv_t)(const char *, const char *, const char *, const int *, const void *, void *, const int *,
                       size_t, size_t, size_t);
typedef void (*spr_t)(const char *, const int *, const void *, const void *, const int *, void *, size_t);
typedef void (*spr2_t)(const char *, const int *, const void *, const void *, const int *, const void *,
                       const int *, void *, size_t);

/* A real scalar (plain Python float or int) in the component precision of ``prec``: 0 when not one. */
static int
get_real(PyObject *o, int prec, scalar_t *out)
{
    double v;
    if (PyFloat_Check(o)) v = PyFloat_AS_DOUBLE(o);
    else if (PyLong_Check(o) || PyArray_IsScalar(o, Floating) || PyArray_IsScalar(o, Integer)) {
        v = PyFloat_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
    }
    else return 0;
    if (prec == 0 || prec == 2) out->f = (float)v; else out->d = v;
    return 1;
}

/* An integer (int_value) in [lo, INT32_MAX]: its value, or -1 when not one. */
static inline long
get_size(PyObject *o, long lo)
{
    long v;
    if (!int_value(o, &v)) return -1;
    return (v >= lo && v <= INT32_MAX) ? v : -1;
}

/* An intent(in,out,copy) vector: the caller's array with ``overwrite`` when BLAS may write it, else a
 * Fortran-ordered copy (new references); NULL without exception: Python path. */
static PyArrayObject *
inout_vector(PyObject *o, int prec, int overwrite)
{
    PyArrayObject *v = plain_vector(o, prec, 0);
    if (v == NULL) return NULL;
    if (overwrite && (PyArray_ISWRITEABLE(v) || PyArray_BASE(v) == NULL)) {
        Py_INCREF(v);
        return v;
    }
    return fortran_copy(v);
}

/* A band or general matrix BLAS takes as it is (Fortran-ordered 2-D of the dtype): NULL when not one. */
static PyArrayObject *
fortran_matrix(PyObject *o, int prec)
{
    PyArrayObject *a;
    if (!PyArray_CheckExact(o)) return NULL;
    a = (PyArrayObject *)o;
    if (PyArray_NDIM(a) != 2 || PyArray_TYPE(a) != TYPENUM[prec] || !PyArray_ISNOTSWAPPED(a)
        || !PyArray_ISALIGNED(a) || !PyArray_IS_F_CONTIGUOUS(a) || PyArray_DIM(a, 0) < 1
        || PyArray_DIM(a, 1) < 1 || PyArray_DIM(a, 0) > INT32_MAX || PyArray_DIM(a, 1) > INT32_MAX)
        return NULL;
    return a;
}

static PyArrayObject *
zero_vector(int prec, npy_intp n)
{
    npy_intp dims[1] = {n};
    return new_array(1, dims, TYPENUM[prec], 0, 1);
}

/* A square matrix operand of the dtype, as given: NULL when not one (Python path). */
static PyArrayObject *
square_matrix(PyObject *o, int prec)
{
    PyArrayObject *a;
    if (!PyArray_CheckExact(o)) return NULL;
    a = (PyArrayObject *)o;
    if (PyArray_NDIM(a) != 2 || PyArray_TYPE(a) != TYPENUM[prec] || !PyArray_ISNOTSWAPPED(a)
        || !PyArray_ISALIGNED(a) || PyArray_DIM(a, 0) != PyArray_DIM(a, 1) || PyArray_DIM(a, 0) < 1
        || PyArray_DIM(a, 0) > INT32_MAX)
        return NULL;
    return a;
}

/* A new zero (n x m) Fortran-ordered matrix of the dtype. */
static PyArrayObject *
zero_matrix(int prec, npy_intp m, npy_intp n)
{
    npy_intp dims[2] = {m, n};
    return new_array(2, dims, TYPENUM[prec], 1, 1);
}

/* NotImplemented where nothing went wrong, else NULL (the exception stands): after an allocation. */
static PyObject *
declined(void)
{
    return PyErr_Occurred() ? NULL : Py_NewRef(Py_NotImplemented);
}

/* Whether the arguments hold the defaults the path requires (SIG12: None, offsets 0, increments 1). */
static int
defaults_hold(const Sig12 *s, PyObject *const *args)
{
    for (int i = 0; i < 2; i++) {
        if (s->none[i] >= 0 && args[s->none[i]] != Py_None) return 0;
        if (s->zero[i] >= 0 && !is_int(args[s->zero[i]], 0)) return 0;
        if (s->one[i] >= 0 && !is_int(args[s->one[i]], 1)) return 0;
    }
    return 1;
}

/* axpy, copy, swap, dot, dotu, dotc: two vectors of k elements */
static PyObject *
l1_pair(const Level12Object *self, const Sig12 *s, PyObject *const *args)
{
    int kind = self->kind, prec = self->prec, one = 1, k;
    void *fn = self->fn;
    PyArrayObject *x, *y;
    scalar_t a;
    if ((x = plain_vector(args[s->x], prec, kind == SWAP)) == NULL) Py_RETURN_NOTIMPLEMENTED;
    if ((y = plain_vector(args[s->y], prec, kind == AXPY || kind == COPY || kind == SWAP)) == NULL)
        Py_RETURN_NOTIMPLEMENTED;
    k = (int)PyArray_SIZE(x);
    if (k < 1 || PyArray_SIZE(y) < k) Py_RETURN_NOTIMPLEMENTED;
    /* an output y overlapping x elsewhere than on it exactly: the Python path, which copies x first */
    if ((kind == AXPY || kind == COPY) && PyArray_DATA(x) != PyArray_DATA(y) && overlaps(x, y))
        Py_RETURN_NOTIMPLEMENTED;
    switch (kind) {
    case AXPY:
        if (!get_scalar(args[s->alpha], prec, 0, &a)) Py_RETURN_NOTIMPLEMENTED;
        RUN(k, ((axpy_t)fn)(&k, &a, PyArray_DATA(x), &one, PyArray_DATA(y), &one));
        return Py_NewRef((PyObject *)y);
    case COPY:
        RUN(k, ((copy_t)fn)(&k, PyArray_DATA(x), &one, PyArray_DATA(y), &one));
        return Py_NewRef((PyObject *)y);
    case SWAP: /* swap's signature is copy's */
        RUN(k, ((copy_t)fn)(&k, PyArray_DATA(x), &one, PyArray_DATA(y), &one));
        return PyTuple_Pack(2, (PyObject *)x, (PyObject *)y);
    case DOT:
        if (prec == 0) {
            float r = 0;
            RUN(k, r = ((sdot_t)fn)(&k, PyArray_DATA(x), &one, PyArray_DATA(y), &one));
            return PyFloat_FromDouble((double)r);
        }
        else {
            double r = 0;
            RUN(k, r = ((ddot_t)fn)(&k, PyArray_DATA(x), &one, PyArray_DATA(y), &one));
            return PyFloat_FromDouble(r);
        }
    default: /* dotu / dotc through CBLAS's *_sub form (no complex return value across the ABI) */
        RUN(k, ((cdot_sub_t)fn)(k, PyArray_DATA(x), 1, PyArray_DATA(y), 1, &a));
        if (prec == 2) return PyComplex_FromDoubles((double)a.cf[0], (double)a.cf[1]);
        return PyComplex_FromDoubles(a.cd[0], a.cd[1]);
    }
}

/* scal: x scaled in place */
static PyObject *
l1_scal(const Level12Object *self, const Sig12 *s, PyObject *const *args)
{
    int one = 1, k;
    PyArrayObject *x;
    scalar_t a;
    if ((x = plain_vector(args[s->x], self->prec, 1)) == NULL) Py_RETURN_NOTIMPLEMENTED;
    k = (int)PyArray_SIZE(x);
    if (k < 1 || !get_scalar(args[s->alpha], self->prec, 0, &a)) Py_RETURN_NOTIMPLEMENTED;
    RUN(k, ((scal_t)self->fn)(&k, &a, PyArray_DATA(x), &one));
    return Py_NewRef((PyObject *)x);
}

/* nrm2, asum, iamax: one vector to a number (of the vector's component precision) */
static PyObject *
l1_reduce(const Level12Object *self, const Sig12 *s, PyObject *const *args)
{
    int prec = self->prec, one = 1, k;
    void *fn = self->fn;
    PyArrayObject *x;
    if ((x = plain_vector(args[s->x], prec, 0)) == NULL) Py_RETURN_NOTIMPLEMENTED;
    k = (int)PyArray_SIZE(x);
    if (k < 1) Py_RETURN_NOTIMPLEMENTED;
    if (self->kind == IAMAX) {
        int r = 0;
        RUN(k, r = ((iamax_t)fn)(&k, PyArray_DATA(x), &one));
        return PyLong_FromLong((long)r - 1);
    }
    if (prec == 0 || prec == 2) {
        float r = 0;
        RUN(k, r = ((snrm_t)fn)(&k, PyArray_DATA(x), &one));
        return PyFloat_FromDouble((double)r);
    }
    else {
        double r = 0;
        RUN(k, r = ((dnrm_t)fn)(&k, PyArray_DATA(x), &one));
        return PyFloat_FromDouble(r);
    }
}

/* gemv: a new y = alpha op(a) x (+ beta 0); a C-ordered a as the Fortran-ordered a.T */
static PyObject *
l2_gemv(const Level12Object *self, const Sig12 *s, PyObject *const *args)
{
    int prec = self->prec, one = 1, tr, m, n, rows, cols, M, N;
    PyArrayObject *a, *x, *out;
    scalar_t alpha, beta;
    char t;
    npy_intp dims[1];
    if (is_int(args[s->trans], 0)) tr = 0;
    else if (is_int(args[s->trans], 1)) tr = 1;
    else Py_RETURN_NOTIMPLEMENTED;
    if (!PyArray_CheckExact(args[s->a])) Py_RETURN_NOTIMPLEMENTED;
    a = (PyArrayObject *)args[s->a];
    if (PyArray_NDIM(a) != 2 || PyArray_TYPE(a) != TYPENUM[prec] || !PyArray_ISNOTSWAPPED(a)
        || !PyArray_ISALIGNED(a) || PyArray_DIM(a, 0) > INT32_MAX || PyArray_DIM(a, 1) > INT32_MAX)
        Py_RETURN_NOTIMPLEMENTED;
    if ((x = plain_vector(args[s->x], prec, 0)) == NULL) Py_RETURN_NOTIMPLEMENTED;
    if (!get_scalar(args[s->alpha], prec, 0, &alpha)) Py_RETURN_NOTIMPLEMENTED;
    if (!get_beta(args[s->beta], prec, 0, &beta)) Py_RETURN_NOTIMPLEMENTED;
    m = (int)PyArray_DIM(a, 0);
    n = (int)PyArray_DIM(a, 1);
    rows = tr ? n : m;
    cols = tr ? m : n;
    if (rows < 1 || PyArray_SIZE(x) < (cols > 1 ? cols : 1)) Py_RETURN_NOTIMPLEMENTED;
    if (PyArray_IS_F_CONTIGUOUS(a)) { M = m; N = n; t = tr ? 'T' : 'N'; }
    else if (PyArray_IS_C_CONTIGUOUS(a)) { M = n; N = m; t = tr ? 'N' : 'T'; }  /* a.T is Fortran */
    else Py_RETURN_NOTIMPLEMENTED;
    if (M < 1) Py_RETURN_NOTIMPLEMENTED;
    dims[0] = rows;
    if ((out = new_array(1, dims, TYPENUM[prec], 0, 1)) == NULL) return NULL;
    RUN((long)M * N, ((gemv_t)self->fn)(&t, &M, &N, &alpha, PyArray_DATA(a), &M, PyArray_DATA(x), &one, &beta,
                                        PyArray_DATA(out), &one, 1));
    return (PyObject *)out;
}

/* symv, hemv: a new y; a C-ordered symmetric a is its own transpose: the other triangle (not Hermitian) */
static PyObject *
l2_symv(const Level12Object *self, const Sig12 *s, PyObject *const *args)
{
    int prec = self->prec, one = 1, n, lo;
    PyArrayObject *a, *x, *out;
    scalar_t alpha, beta;
    char uplo;
    npy_intp dims[1];
    if ((lo = get_flag(args[s->lower], 1)) < 0) Py_RETURN_NOTIMPLEMENTED;
    if ((a = square_matrix(args[s->a], prec)) == NULL || (x = plain_vector(args[s->x], prec, 0)) == NULL)
        Py_RETURN_NOTIMPLEMENTED;
    if (!get_scalar(args[s->alpha], prec, 0, &alpha)) Py_RETURN_NOTIMPLEMENTED;
    if (!get_beta(args[s->beta], prec, 0, &beta)) Py_RETURN_NOTIMPLEMENTED;
    n = (int)PyArray_DIM(a, 0);
    if (PyArray_SIZE(x) < n) Py_RETURN_NOTIMPLEMENTED;
    uplo = lo ? 'L' : 'U';
    if (!PyArray_IS_F_CONTIGUOUS(a)) {
        if (self->kind == HEMV || !PyArray_IS_C_CONTIGUOUS(a)) Py_RETURN_NOTIMPLEMENTED;
        uplo = lo ? 'U' : 'L';
    }
    dims[0] = n;
    if ((out = new_array(1, dims, TYPENUM[prec], 0, 1)) == NULL) return NULL;
    RUN((long)n * n, ((symv_t)self->fn)(&uplo, &n, &alpha, PyArray_DATA(a), &n, PyArray_DATA(x), &one, &beta,
                                        PyArray_DATA(out), &one, 1));
    return (PyObject *)out;
}

/* trmv, trsv: x (intent(in,out,copy)) multiplied or solved in place, or a Fortran-ordered copy of it */
static PyObject *
l2_trmv(const Level12Object *self, const Sig12 *s, PyObject *const *args)
{
    int prec = self->prec, one = 1, n, lo, tr, dg, ow;
    PyArrayObject *a, *x, *out;
    char uplo, t, diag;
    lo = get_flag(args[s->lower], 1);
    tr = get_flag(args[s->trans], 2);
    dg = get_flag(args[s->diag], 1);
    ow = get_overwrite(args[s->ow]);
    if (lo < 0 || tr < 0 || dg < 0 || ow < 0) Py_RETURN_NOTIMPLEMENTED;
    if ((a = square_matrix(args[s->a], prec)) == NULL) Py_RETURN_NOTIMPLEMENTED;
    if ((x = plain_vector(args[s->x], prec, 0)) == NULL) Py_RETURN_NOTIMPLEMENTED;
    n = (int)PyArray_DIM(a, 0);
    if (PyArray_SIZE(x) < n) Py_RETURN_NOTIMPLEMENTED;
    if (PyArray_IS_F_CONTIGUOUS(a)) {
        uplo = lo ? 'L' : 'U';
        t = "NTC"[tr];
    }
    else if (PyArray_IS_C_CONTIGUOUS(a) && (prec < 2 || tr < 2)) {  /* a.T is Fortran-ordered */
        uplo = lo ? 'U' : 'L';
        t = tr ? 'N' : 'T';
    }
    else Py_RETURN_NOTIMPLEMENTED;
    diag = dg ? 'U' : 'N';
    if (ow && (PyArray_ISWRITEABLE(x) || PyArray_BASE(x) == NULL)) {
        if (overlaps(x, a)) Py_RETURN_NOTIMPLEMENTED;
        out = (PyArrayObject *)Py_NewRef((PyObject *)x);
    }
    else if ((out = fortran_copy(x)) == NULL) return NULL;
    RUN((long)n * n, ((trmv_t)self->fn)(&uplo, &t, &diag, &n, PyArray_DATA(a), &n, PyArray_DATA(out), &one, 1, 1,
                                        1));
    return (PyObject *)out;
}

/* ger, geru, gerc: a new a = alpha x y^T (y^H) */
static PyObject *
l2_ger(const Level12Object *self, const Sig12 *s, PyObject *const *args)
{
    int prec = self->prec, one = 1, m, n;
    PyArrayObject *x, *y, *out;
    scalar_t alpha;
    if ((x = plain_vector(args[s->x], prec, 0)) == NULL || (y = plain_vector(args[s->y], prec, 0)) == NULL)
        Py_RETURN_NOTIMPLEMENTED;
    if (!get_scalar(args[s->alpha], prec, 0, &alpha)) Py_RETURN_NOTIMPLEMENTED;
    m = (int)PyArray_SIZE(x);
    n = (int)PyArray_SIZE(y);
    if (m < 1 || n < 1) Py_RETURN_NOTIMPLEMENTED;
    if ((out = zero_matrix(prec, m, n)) == NULL) return NULL;
    RUN((long)m * n, ((ger_t)self->fn)(&m, &n, &alpha, PyArray_DATA(x), &one, PyArray_DATA(y), &one,
                                       PyArray_DATA(out), &m));
    return (PyObject *)out;
}

/* syr, her (real alpha), syr2, her2: a new a, one triangle written */
static PyObject *
l2_syr(const Level12Object *self, const Sig12 *s, PyObject *const *args)
{
    int kind = self->kind, prec = self->prec, one = 1, two = kind == SYR2 || kind == HER2, n, lo;
    PyArrayObject *x, *y = NULL, *out;
    scalar_t alpha;
    char uplo;
    if ((lo = get_flag(args[s->lower], 1)) < 0) Py_RETURN_NOTIMPLEMENTED;
    if ((x = plain_vector(args[s->x], prec, 0)) == NULL || (two && (y = plain_vector(args[s->y], prec, 0)) == NULL))
        Py_RETURN_NOTIMPLEMENTED;
    if (kind == HER && PyComplex_Check(args[s->alpha])) Py_RETURN_NOTIMPLEMENTED;
    if (!get_scalar(args[s->alpha], prec, kind == HER, &alpha)) Py_RETURN_NOTIMPLEMENTED;
    n = (int)PyArray_SIZE(x);
    if (two && PyArray_SIZE(y) < n) n = (int)PyArray_SIZE(y);
    if (n < 1) Py_RETURN_NOTIMPLEMENTED;
    uplo = lo ? 'L' : 'U';
    if ((out = zero_matrix(prec, n, n)) == NULL) return NULL;
    if (two)
        RUN((long)n * n, ((syr2_t)self->fn)(&uplo, &n, &alpha, PyArray_DATA(x), &one, PyArray_DATA(y), &one,
                                            PyArray_DATA(out), &n, 1));
    else
        RUN((long)n * n, ((syr_t)self->fn)(&uplo, &n, &alpha, PyArray_DATA(x), &one, PyArray_DATA(out), &n, 1));
    return (PyObject *)out;
}

/* rot (real c, s), rotm (param): x and y (intent(in,out,copy)) rotated */
static PyObject *
l1_rot(const Level12Object *self, const Sig12 *s, PyObject *const *args)
{
    int prec = self->prec, one = 1, k, owx, owy;
    PyArrayObject *y, *xo, *yo, *pa = NULL;
    scalar_t c, sn;
    PyObject *r;
    owx = get_overwrite(args[s->ow]);
    owy = get_overwrite(args[s->ow2]);
    if (owx < 0 || owy < 0) Py_RETURN_NOTIMPLEMENTED;
    if (self->kind == ROT) {
        if (!get_real(args[s->alpha], prec, &c) || !get_real(args[s->beta], prec, &sn)) Py_RETURN_NOTIMPLEMENTED;
    }
    else if ((pa = plain_vector(args[s->a], prec, 0)) == NULL || PyArray_SIZE(pa) != 5)
        Py_RETURN_NOTIMPLEMENTED;
    if (plain_vector(args[s->x], prec, 0) == NULL || (y = plain_vector(args[s->y], prec, 0)) == NULL)
        Py_RETURN_NOTIMPLEMENTED;
    k = (int)PyArray_SIZE((PyArrayObject *)args[s->x]);
    if (k < 1 || PyArray_SIZE(y) < k) Py_RETURN_NOTIMPLEMENTED;
    if ((xo = inout_vector(args[s->x], prec, owx)) == NULL) return declined();
    if ((yo = inout_vector(args[s->y], prec, owy)) == NULL) {
        Py_DECREF(xo);
        return declined();
    }
    if (self->kind == ROT)
        RUN(k, ((rot_t)self->fn)(&k, PyArray_DATA(xo), &one, PyArray_DATA(yo), &one, &c, &sn));
    else
        RUN(k, ((rotm_t)self->fn)(&k, PyArray_DATA(xo), &one, PyArray_DATA(yo), &one, PyArray_DATA(pa)));
    r = PyTuple_Pack(2, (PyObject *)xo, (PyObject *)yo);
    Py_DECREF(xo);
    Py_DECREF(yo);
    return r;
}

/* rscal (csscal / zdscal): x (intent(in,out,copy)) scaled by a real a */
static PyObject *
l1_rscal(const Level12Object *self, const Sig12 *s, PyObject *const *args)
{
    int prec = self->prec, one = 1, k, ow = get_overwrite(args[s->ow]);
    PyArrayObject *x, *xo;
    scalar_t a;
    if (ow < 0) Py_RETURN_NOTIMPLEMENTED;
    if (!get_real(args[s->alpha], prec, &a) || (x = plain_vector(args[s->x], prec, 0)) == NULL)
        Py_RETURN_NOTIMPLEMENTED;
    k = (int)PyArray_SIZE(x);
    if (k < 1) Py_RETURN_NOTIMPLEMENTED;
    if ((xo = inout_vector(args[s->x], prec, ow)) == NULL) return declined();
    RUN(k, ((scal_t)self->fn)(&k, &a, PyArray_DATA(xo), &one));
    return (PyObject *)xo;
}

/* rotg(a, b) -> (c, s) */
static PyObject *
l1_rotg(const Level12Object *self, const Sig12 *s, PyObject *const *args)
{
    scalar_t a, b, c, sn;
    int prec = self->prec;
    if (!get_scalar(args[s->alpha], prec, 0, &a) || !get_scalar(args[s->beta], prec, 0, &b))
        Py_RETURN_NOTIMPLEMENTED;
    memset(&c, 0, sizeof c);
    memset(&sn, 0, sizeof sn);
    ((rotg_t)self->fn)(&a, &b, &c, &sn);
    switch (prec) {
    case 0: return Py_BuildValue("(dd)", (double)c.f, (double)sn.f);
    case 1: return Py_BuildValue("(dd)", c.d, sn.d);
    case 2: {
        Py_complex cc = {(double)c.f, 0.0}, ss = {(double)sn.cf[0], (double)sn.cf[1]};
        return Py_BuildValue("(DD)", &cc, &ss);
    }
    default: {
        Py_complex cc = {c.d, 0.0}, ss = {sn.cd[0], sn.cd[1]};
        return Py_BuildValue("(DD)", &cc, &ss);
    }
    }
}

/* rotmg(d1, d2, x1, y1) -> param (5,) */
static PyObject *
l1_rotmg(const Level12Object *self, const Sig12 *s, PyObject *const *args)
{
    scalar_t d1, d2, x1, y1;
    PyArrayObject *param;
    int prec = self->prec;
    if (!get_real(args[s->alpha], prec, &d1) || !get_real(args[s->beta], prec, &d2) || !get_real(args[s->x], prec, &x1)
        || !get_real(args[s->y], prec, &y1))
        Py_RETURN_NOTIMPLEMENTED;
    if ((param = zero_vector(prec, 5)) == NULL) return NULL;
    ((rotmg_t)self->fn)(&d1, &d2, &x1, &y1, PyArray_DATA(param));
    return (PyObject *)param;
}

/* gbmv: a new y = alpha op(a) x with a band a (Fortran-ordered, kl + ku + 1 rows at least) */
static PyObject *
l2_gbmv(const Level12Object *self, const Sig12 *s, PyObject *const *args)
{
    int prec = self->prec, one = 1, im, in, ikl, iku, lda, tr, rows, cols;
    PyArrayObject *a, *x, *out;
    scalar_t alpha, beta;
    long m, n, kl, ku;
    char t;
    if ((m = get_size(args[s->size], 1)) < 0 || (n = get_size(args[s->size + 1], 1)) < 0
        || (kl = get_size(args[s->size + 2], 0)) < 0 || (ku = get_size(args[s->size + 3], 0)) < 0)
        Py_RETURN_NOTIMPLEMENTED;
    if ((tr = get_flag(args[s->trans], 2)) < 0) Py_RETURN_NOTIMPLEMENTED;
    if ((a = fortran_matrix(args[s->a], prec)) == NULL || (x = plain_vector(args[s->x], prec, 0)) == NULL)
        Py_RETURN_NOTIMPLEMENTED;
    if (m < kl + ku + 1 || PyArray_DIM(a, 1) != n || PyArray_DIM(a, 0) < kl + ku + 1) Py_RETURN_NOTIMPLEMENTED;
    if (!get_scalar(args[s->alpha], prec, 0, &alpha)) Py_RETURN_NOTIMPLEMENTED;
    if (!get_beta(args[s->beta], prec, 0, &beta)) Py_RETURN_NOTIMPLEMENTED;
    rows = (int)(tr ? n : m);
    cols = (int)(tr ? m : n);
    if (PyArray_SIZE(x) < cols) Py_RETURN_NOTIMPLEMENTED;
    if ((out = zero_vector(prec, rows)) == NULL) return NULL;
    im = (int)m;
    in = (int)n;
    ikl = (int)kl;
    iku = (int)ku;
    lda = (int)PyArray_DIM(a, 0);
    t = "NTC"[tr];
    RUN((long)rows * (kl + ku + 1), ((gbmv_t)self->fn)(&t, &im, &in, &ikl, &iku, &alpha, PyArray_DATA(a), &lda,
                                                        PyArray_DATA(x), &one, &beta, PyArray_DATA(out), &one, 1));
    return (PyObject *)out;
}

/* The matrix operand of the band and packed routines: band, a (lda x n) with kk off-diagonals at most
 * lda - 1; packed, ap with n = kk and n (n + 1) / 2 elements at least.  NULL where the path declines it. */
static inline PyArrayObject *
band_or_packed(PyObject *arg, int prec, int band, long kk, int *n, int *lda)
{
    PyArrayObject *a;
    if (band) {
        if ((a = fortran_matrix(arg, prec)) == NULL || kk > PyArray_DIM(a, 0) - 1) return NULL;
        *n = (int)PyArray_DIM(a, 1);
        *lda = (int)PyArray_DIM(a, 0);
    }
    else {
        if ((a = plain_vector(arg, prec, 0)) == NULL) return NULL;
        *n = (int)kk;
        *lda = 0;
        if (PyArray_SIZE(a) < (npy_intp)*n * (*n + 1) / 2) return NULL;
    }
    return a;
}

/* sbmv, hbmv (band a, k diagonals), spmv, hpmv (packed ap of order n): a new y */
static PyObject *
l2_band_mv(const Level12Object *self, const Sig12 *s, PyObject *const *args)
{
    int kind = self->kind, prec = self->prec, one = 1, band = kind == SBMV || kind == HBMV, n, ik, lda, lo;
    PyArrayObject *a, *x, *out;
    scalar_t alpha, beta;
    long kk;
    char uplo;
    if ((kk = get_size(args[s->size], band ? 0 : 1)) < 0 || (lo = get_flag(args[s->lower], 1)) < 0)
        Py_RETURN_NOTIMPLEMENTED;
    if ((x = plain_vector(args[s->x], prec, 0)) == NULL) Py_RETURN_NOTIMPLEMENTED;
    if ((a = band_or_packed(args[s->a], prec, band, kk, &n, &lda)) == NULL) Py_RETURN_NOTIMPLEMENTED;
    if (PyArray_SIZE(x) < n) Py_RETURN_NOTIMPLEMENTED;
    if (!get_scalar(args[s->alpha], prec, 0, &alpha)) Py_RETURN_NOTIMPLEMENTED;
    if (!get_beta(args[s->beta], prec, 0, &beta)) Py_RETURN_NOTIMPLEMENTED;
    if ((out = zero_vector(prec, n)) == NULL) return NULL;
    uplo = lo ? 'L' : 'U';
    ik = (int)kk;
    if (band)
        RUN((long)n * (ik + 1), ((sbmv_t)self->fn)(&uplo, &n, &ik, &alpha, PyArray_DATA(a), &lda, PyArray_DATA(x),
                                                   &one, &beta, PyArray_DATA(out), &one, 1));
    else
        RUN((long)n * n, ((spmv_t)self->fn)(&uplo, &n, &alpha, PyArray_DATA(a), PyArray_DATA(x), &one, &beta,
                                            PyArray_DATA(out), &one, 1));
    return (PyObject *)out;
}

/* tbmv, tbsv (band a), tpmv, tpsv (packed ap): x (intent(in,out,copy)) multiplied or solved */
static PyObject *
l2_band_tri(const Level12Object *self, const Sig12 *s, PyObject *const *args)
{
    int kind = self->kind, prec = self->prec, one = 1, band = kind == TBMV || kind == TBSV, n, ik, lda, lo, tr, dg,
        ow;
    PyArrayObject *a, *x, *out;
    long kk;
    char uplo, t, diag;
    if ((kk = get_size(args[s->size], band ? 0 : 1)) < 0) Py_RETURN_NOTIMPLEMENTED;
    lo = get_flag(args[s->lower], 1);
    tr = get_flag(args[s->trans], 2);
    dg = get_flag(args[s->diag], 1);
    ow = get_overwrite(args[s->ow]);
    if (lo < 0 || tr < 0 || dg < 0 || ow < 0) Py_RETURN_NOTIMPLEMENTED;
    if ((a = band_or_packed(args[s->a], prec, band, kk, &n, &lda)) == NULL) Py_RETURN_NOTIMPLEMENTED;
    if ((x = plain_vector(args[s->x], prec, 0)) == NULL || PyArray_SIZE(x) < n) Py_RETURN_NOTIMPLEMENTED;
    if (ow && overlaps(x, a)) Py_RETURN_NOTIMPLEMENTED;
    if ((out = inout_vector(args[s->x], prec, ow)) == NULL) return declined();
    uplo = lo ? 'L' : 'U';
    t = "NTC"[tr];
    diag = dg ? 'U' : 'N';
    ik = (int)kk;
    if (band)
        RUN((long)n * (ik + 1), ((tbmv_t)self->fn)(&uplo, &t, &diag, &n, &ik, PyArray_DATA(a), &lda,
                                                   PyArray_DATA(out), &one, 1, 1, 1));
    else
        RUN((long)n * n, ((tpmv_t)self->fn)(&uplo, &t, &diag, &n, PyArray_DATA(a), PyArray_DATA(out), &one, 1, 1, 1));
    return (PyObject *)out;
}

/* spr, hpr (real alpha), spr2, hpr2: ap (intent(in,out,copy)) updated */
static PyObject *
l2_packed_rank(const Level12Object *self, const Sig12 *s, PyObject *const *args)
{
    int kind = self->kind, prec = self->prec, one = 1, two = kind == SPR2 || kind == HPR2, n, lo, ow;
    PyArrayObject *x, *y = NULL, *ap, *out;
    scalar_t alpha;
    long nn;
    char uplo;
    if ((nn = get_size(args[s->size], 1)) < 0) Py_RETURN_NOTIMPLEMENTED;
    lo = get_flag(args[s->lower], 1);
    ow = get_overwrite(args[s->ow]);
    if (lo < 0 || ow < 0) Py_RETURN_NOTIMPLEMENTED;
    n = (int)nn;
    if ((x = plain_vector(args[s->x], prec, 0)) == NULL || PyArray_SIZE(x) < n) Py_RETURN_NOTIMPLEMENTED;
    if (two && ((y = plain_vector(args[s->y], prec, 0)) == NULL || PyArray_SIZE(y) < n)) Py_RETURN_NOTIMPLEMENTED;
    if ((ap = plain_vector(args[s->a], prec, 0)) == NULL || PyArray_SIZE(ap) < (npy_intp)n * (n + 1) / 2)
        Py_RETURN_NOTIMPLEMENTED;
    if (kind == HPR && PyComplex_Check(args[s->alpha])) Py_RETURN_NOTIMPLEMENTED;
    if (!get_scalar(args[s->alpha], prec, kind == HPR, &alpha)) Py_RETURN_NOTIMPLEMENTED;
    if (ow && (overlaps(ap, x) || (y != NULL && overlaps(ap, y)))) Py_RETURN_NOTIMPLEMENTED;
    if ((out = inout_vector(args[s->a], prec, ow)) == NULL) return declined();
    uplo = lo ? 'L' : 'U';
    if (two)
        RUN((long)n * n, ((spr2_t)self->fn)(&uplo, &n, &alpha, PyArray_DATA(x), &one, PyArray_DATA(y), &one,
                                            PyArray_DATA(out), 1));
    else
        RUN((long)n * n, ((spr_t)self->fn)(&uplo, &n, &alpha, PyArray_DATA(x), &one, PyArray_DATA(out), 1));
    return (PyObject *)out;
}

/* The call once the arrays are as BLAS takes them (or left to the Python path): the kind's defaults, then
 * the function of its group. */
static PyObject *
level12_call(Level12Object *self, PyObject *const *args)
{
    const Sig12 *s = &SIG12[self->kind];
    if (self->fn == NULL || (fp_declining && fp_declined) || !defaults_hold(s, args)) Py_RETURN_NOTIMPLEMENTED;
    switch (self->kind) {
    case AXPY:
    case COPY:
    case SWAP:
    case DOT:
    case DOTU:
    case DOTC: return l1_pair(self, s, args);
    case SCAL: return l1_scal(self, s, args);
    case NRM2:
    case ASUM:
    case IAMAX: return l1_reduce(self, s, args);
    case GEMV: return l2_gemv(self, s, args);
    case SYMV:
    case HEMV: return l2_symv(self, s, args);
    case TRMV:
    case TRSV: return l2_trmv(self, s, args);
    case GER:
    case GERU:
    case GERC: return l2_ger(self, s, args);
    case SYR:
    case HER:
    case SYR2:
    case HER2: return l2_syr(self, s, args);
    case ROT:
    case ROTM: return l1_rot(self, s, args);
    case RSCAL: return l1_rscal(self, s, args);
    case ROTG: return l1_rotg(self, s, args);
    case ROTMG: return l1_rotmg(self, s, args);
    case GBMV: return l2_gbmv(self, s, args);
    case SBMV:
    case HBMV:
    case SPMV:
    case HPMV: return l2_band_mv(self, s, args);
    case TBMV:
    case TBSV:
    case TPMV:
    case TPSV: return l2_band_tri(self, s, args);
    case SPR:
    case HPR:
    case SPR2:
    case HPR2: return l2_packed_rank(self, s, args);
    default: Py_RETURN_NOTIMPLEMENTED;
    }
}

/* The small-call path given all the routine's arguments in order (as level3_small): where the call as given
 * is not one the C path takes, array arguments of another dtype, byte order or alignment, or strided, are
 * copied (convert_array) and the call is tried again with them. */
static PyObject *
level12_small(Routine *routine, PyObject *const *args)
{
    Level12Object *self = (Level12Object *)routine;
    Py_ssize_t nargs = SIG12[self->kind].nargs;
    PyObject *given[MAX_PARAMS], *r;
    int any = 0;
    r = level12_call(self, args);  /* the common call: nothing to convert, nothing more to pay */
    if (r != Py_NotImplemented || self->fn == NULL || (fp_declining && fp_declined)) return r;  /* or closed */
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *c;
        if (!PyArray_CheckExact(args[i])) continue;
        c = convert_array(args[i], self->prec);
        if (c != NULL && !any) {
            memcpy(given, args, (size_t)nargs * sizeof *given);
            any = 1;
        }
        if (c != NULL) given[i] = c;
    }
    if (!any) return r;  /* NotImplemented: the Python path */
    Py_DECREF(r);
    r = level12_call(self, given);
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (given[i] != args[i]) Py_DECREF(given[i]);
    return r;
}

static PyObject *
level12_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    const char *kind, *prefix;
    PyObject *addr;
    Level12Object *self;
    int f = -1, p = -1;
    void *fn;
    static char *kwlist[] = {"kind", "prefix", "address", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ssO", kwlist, &kind, &prefix, &addr))
        return NULL;
    for (int i = 0; i < NKIND; i++)
        if (strcmp(kind, KIND[i]) == 0) f = i;
    if (prefix[0] != '\0' && prefix[1] == '\0') p = prefix_index(prefix[0]);
    if (f < 0 || p < 0) {
        PyErr_Format(PyExc_ValueError, "unknown Level-1/2 routine kind %s with prefix %s", kind, prefix);
        return NULL;
    }
    if ((f == DOT && p >= 2) || ((f == DOTU || f == DOTC || f == HEMV || f == GERU || f == GERC || f == HER
                                   || f == HER2 || f == HBMV || f == HPMV || f == HPR || f == HPR2) && p < 2)
        || ((f == GER || f == SYMV || f == SYR2 || f == SBMV || f == SPR2 || f == ROTM || f == ROTMG) && p >= 2)) {
        PyErr_Format(PyExc_ValueError, "%s%s does not exist in this precision", prefix, kind);
        return NULL;
    }
    fn = PyLong_AsVoidPtr(addr);
    if (fn == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "address must not be 0");
        return NULL;
    }
    self = (Level12Object *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->kind = f;
    self->prec = p;
    self->fn = fn;
    if (routine_init(&self->r, level12_small, SIG12[f].nargs, NULL, NULL, NULL, "Level12") < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* "<tileblas small-call path of gemv (d)>"; with a front, the routine's name */
static PyObject *
level12_repr(Level12Object *self)
{
    if (self->r.front.fallback != NULL) return front_repr((PyObject *)self);
    return PyUnicode_FromFormat("<tileblas small-call path of %s (%c)>", KIND[self->kind], PREFIXES[self->prec]);
}

PyTypeObject Level12Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tileblas.blas._fastpath.Level12",
    .tp_basicsize = sizeof(Level12Object),
    .tp_doc = "Level12(kind, prefix, address): the small-call path of one Level-1/2 routine; called with\n"
              "all the routine's arguments positionally, it returns the result or NotImplemented.\n"
              "small.front(fallback, names, defaults) puts it in front of the Python implementation.",
    .tp_new = level12_new,
    .tp_repr = (reprfunc)level12_repr,
    ROUTINE_TYPE_SLOTS,
};
