/*
 * tileblas.blas._fastpath -- the small-call path of the drop-in routines (Level 3 below; Level 1/2 further
 * down, with their own notes).
 *
 * Each public Level-3 routine of tileblas.blas (tileblas.blas._level3) is a Level3 object of this module
 * with a front (below): called as users call it, it binds the arguments to the routine's parameters here
 * and, when the call is a common one, does the whole call here: one validation, one native BLAS call on tileblas' OpenBLAS instance of the path
 * policy's thread count, the result array returned.  Anything else -- other types or dtypes, N-d or
 * empty operands, shapes that do not fit, flag values out of range, memory shared between the output and
 * an input, calls at or above the flop limit where the path policy tiles or recurses, a runtime other
 * than the process default in force -- goes, as it was made, to the Python implementation *before
 * anything is written*: it raises the errors (naming the argument) and runs the runtime.  (A bare object,
 * made without a fallback, returns NotImplemented instead.)
 *
 * Semantics are those of the Python implementation (SciPy's): the output is a new Fortran-ordered array
 * unless overwrite_* is set and the caller's array is already a Fortran-contiguous, aligned, writeable
 * array of the routine's dtype, which is then updated in place.  Read-only operands are used in place
 * when Fortran- or C-contiguous: a C-ordered operand is passed as the transpose of a Fortran-ordered
 * one by flipping the trans/uplo flags (where the algebra allows it; otherwise it is copied, as f2py
 * copies it).
 *
 * Module state set from Python (tileblas.blas._dispatch):
 *   set_level3_limits({family: flops})   calls with at least this many flops take the Python path;
 *                                        'dtrmm/L'-style keys set one precision and side of trmm/trsm
 *   set_recursion_windows({'dtrmm/L': (min_order, rhs_lo, rhs_hi) or None})
 *                                        trmm/trsm calls of these shapes (the recursion may take them)
 *                                        take the Python path
 *   set_level3_library({name: address})  Fortran entry points ('dgemm' -> address of dgemm_)
 *   set_one_thread({family: flops}, {name: address})
 *                                        calls below these flops run on these entry points (the
 *                                        one-thread instance: OpenBLAS threads even tiny trmm calls)
 *   set_state(enabled, contextvar)       enabled: the default runtime takes the native path for small
 *                                        calls; contextvar: the current-runtime variable (a value in it
 *                                        means a `with Runtime(...)` block is active: Python path)
 *   decline(flag) -> previous            this thread's calls all take the Python path while set (the
 *                                        64-bit-integer functions of get_blas_funcs(ilp64=True): the
 *                                        paths here call 32-bit entry points)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define NPY_TARGET_VERSION NPY_1_22_API_VERSION /* PyDataMem_Handler, an array's mem_handler */
#include <numpy/arrayobject.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "_pool.h"
#if defined(__linux__)
#include <sys/mman.h>
#endif

enum { GEMM, SYMM, HEMM, SYRK, HERK, SYR2K, HER2K, TRMM, TRSM, NFAM };
static const char *FAMILY[NFAM] = {"gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm"};
static const char PREFIXES[4] = {'s', 'd', 'c', 'z'};
static const int TYPENUM[4] = {NPY_FLOAT, NPY_DOUBLE, NPY_CFLOAT, NPY_CDOUBLE};

static double limits[NFAM];           /* flops from which the Python path runs (0: never fast) */
/* trmm/trsm: the same per precision and side (the recursion, which only the Python path runs, is chosen
 * per precision and side): tri_limits[family - TRMM][precision][side 0 L, 1 R]. */
static double tri_limits[2][4][2];
/* ... and the shapes the recursion may take there (Python path): order >= [0] with [1] <= right-hand
 * sides <= [2]; [0] = 0: none.  tri_window[family - TRMM][precision][side][3]. */
static double tri_window[2][4][2][3];
static void *entry[NFAM][4];          /* Fortran entry points, NULL: not set */
/* The same on tileblas' one-thread instance, for calls below one_limits[family] flops: there OpenBLAS's
 * own threads cost more than they bring (it splits even tiny trmm calls); 0 / NULL: never. */
static void *entry1[NFAM][4];
static double one_limits[NFAM];
static int enabled = 0;
static PyObject *current_var = NULL;  /* contextvars.ContextVar of the current runtime */
#if defined(_MSC_VER)
static __declspec(thread) int declined = 0;
#else
static _Thread_local int declined = 0;  /* decline(True) in this thread: every call takes the Python path */
#endif
static int declining = 0;  /* threads with `declined` set (changed under the GIL): read before the TLS flag */

/* Above this many flops the BLAS call runs without the GIL (below, releasing it costs more than it
 * lets other threads gain). */
#define GIL_FLOPS 32768.0

/* Run the BLAS call ``stmt`` without the GIL when ``release`` is true, else holding it. */
#define RUN_IF(release, stmt)              \
    do {                                   \
        if (release) {                     \
            Py_BEGIN_ALLOW_THREADS         \
            stmt;                          \
            Py_END_ALLOW_THREADS           \
        }                                  \
        else {                             \
            stmt;                          \
        }                                  \
    } while (0)

typedef union {
    float f;
    double d;
    float cf[2];
    double cd[2];
} scalar_t;

/* The public face of a routine (see "the front" below): its parameters and the Python implementation
 * that takes every call the small-call path declines.  fallback NULL: a bare small-call path, called with
 * every argument positionally, returning NotImplemented where it declines. */
typedef struct {
    PyObject *fallback;                /* the Python implementation */
    PyObject *names;                   /* tuple of the parameter names (interned str) */
    PyObject *defaults;                /* tuple: the defaults of the last len(defaults) parameters */
    PyObject *dict;                    /* __name__, __doc__, __wrapped__, ... (functools.update_wrapper) */
} Front;

#define MAX_PARAMS 16

/* What every routine object (Level3, Level12) starts with: its vectorcall (routine_vectorcall), its
 * front, its parameter count and its small-call path, given all the arguments in order (the result,
 * or NotImplemented having written nothing, or NULL with an exception). */
typedef struct Routine Routine;
struct Routine {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Front front;
    Py_ssize_t nparams;
    PyObject *(*small)(Routine *, PyObject *const *);
};

typedef struct {
    Routine r;
    int fam;
    int prec;                          /* index into PREFIXES */
} Level3Object;

/* ------------------------------------------------------------------------------------- conversion */

/* A scalar as the routine's type; 0 when the object is not a plain Python number (Python path).
 * Real routines take the real part of a complex number, as the Python implementation does. */
static int
get_scalar(PyObject *o, int prec, int real_only, scalar_t *out)
{
    double re, im = 0.0;
    if (PyFloat_Check(o)) {
        re = PyFloat_AS_DOUBLE(o);
    }
    else if (PyLong_Check(o)) {
        re = PyLong_AsDouble(o);
        if (re == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
    }
    else if (PyComplex_Check(o)) {
        re = PyComplex_RealAsDouble(o);
        im = PyComplex_ImagAsDouble(o);
    }
    else if (PyArray_IsScalar(o, Floating) || PyArray_IsScalar(o, Integer)) {  /* np.float32(2), np.int64(3) */
        re = PyFloat_AsDouble(o);
        if (re == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
    }
    else if (PyArray_IsScalar(o, ComplexFloating) && prec >= 2 && !real_only) {
        Py_complex v = PyComplex_AsCComplex(o);
        if (v.real == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        re = v.real;
        im = v.imag;
    }
    else {
        return 0;
    }
    if (real_only || prec < 2) im = 0.0;
    if (real_only) {  /* herk/her2k real scalars of the component precision */
        if (prec == 2) out->f = (float)re; else out->d = re;
        return 1;
    }
    switch (prec) {
    case 0: out->f = (float)re; break;
    case 1: out->d = re; break;
    case 2: out->cf[0] = (float)re; out->cf[1] = (float)im; break;
    default: out->cd[0] = re; out->cd[1] = im; break;
    }
    return 1;
}

/* An optional ``beta``: None is 0 (the Python default), else as :c:func:`get_scalar`. */
static int
get_beta(PyObject *o, int prec, int real_only, scalar_t *out)
{
    if (o == Py_None) {
        memset(out, 0, sizeof *out);
        return 1;
    }
    return get_scalar(o, prec, real_only, out);
}

/* Whether a scalar of precision ``prec`` is zero. */
static int
is_zero(const scalar_t *v, int prec)
{
    switch (prec) {
    case 0: return v->f == 0;
    case 1: return v->d == 0;
    case 2: return v->cf[0] == 0 && v->cf[1] == 0;
    default: return v->cd[0] == 0 && v->cd[1] == 0;
    }
}

/* Index of a precision letter in PREFIXES, or -1. */
static int
prefix_index(char c)
{
    for (int i = 0; i < 4; i++)
        if (c == PREFIXES[i]) return i;
    return -1;
}

/* int_value for everything but an exact int. */
static int
int_value_other(PyObject *o, long *v)
{
    int overflow;
    if (PyFloat_Check(o) || PyArray_IsScalar(o, Floating)) {
        double d = PyFloat_AsDouble(o);
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (!(d > -9.0e18 && d < 9.0e18)) return 0;  /* NaN, infinities and beyond long */
        *v = (long)d;
        return 1;
    }
    if (PyArray_IsScalar(o, Bool)) {
        int t = PyObject_IsTrue(o);
        if (t < 0) {
            PyErr_Clear();
            return 0;
        }
        *v = t;
        return 1;
    }
    if (!PyBool_Check(o) && !PyArray_IsScalar(o, Integer)) return 0;
    *v = PyLong_AsLongAndOverflow(o, &overflow);
    if (overflow) {
        *v = overflow > 0 ? LONG_MAX : LONG_MIN;
        return 1;
    }
    if (*v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* The value of an integer argument as the Python path reads it (int(o)), where o is a Python int, a bool,
 * a float or a NumPy integer, bool or floating scalar (lower=True, overwrite_b=np.True_, an np.int64 from a
 * loop; a float truncates toward zero, as f2py does): 1 with *v set (LONG_MAX or LONG_MIN for an integer
 * beyond long); 0 for anything else, and for floats that are not finite or beyond long (Python path: it
 * converts sequences as f2py does, and its errors name the argument). */
static inline int
int_value(PyObject *o, long *v)
{
    if (PyLong_CheckExact(o)) {  /* the common case first */
        int overflow;
        *v = PyLong_AsLongAndOverflow(o, &overflow);
        if (overflow) *v = overflow > 0 ? LONG_MAX : LONG_MIN;
        return 1;
    }
    return int_value_other(o, v);
}

/* An integer flag: None -> 0; an integer (int_value) in [0, hi]; -1 otherwise (Python path). */
static inline int
get_flag(PyObject *o, int hi)
{
    long v;
    if (o == Py_None) return 0;
    if (!int_value(o, &v)) return -1;
    return (v >= 0 && v <= hi) ? (int)v : -1;
}

/* overwrite_*: None -> 0, an integer (int_value) -> (v != 0), -1 otherwise. */
static inline int
get_overwrite(PyObject *o)
{
    long v;
    if (o == Py_None) return 0;
    if (!int_value(o, &v)) return -1;
    return v != 0;
}

/* A 2-D operand of the routine's dtype, as given (no conversion): NULL when not one (Python path). */
static PyArrayObject *
plain_matrix(PyObject *o, int prec)
{
    PyArrayObject *a;
    if (!PyArray_CheckExact(o)) return NULL;
    a = (PyArrayObject *)o;
    if (PyArray_NDIM(a) != 2 || PyArray_TYPE(a) != TYPENUM[prec] || !PyArray_ISALIGNED(a)
        || !PyArray_ISNOTSWAPPED(a))
        return NULL;
    if (PyArray_DIM(a, 0) < 1 || PyArray_DIM(a, 1) < 1 || PyArray_DIM(a, 0) > INT32_MAX
        || PyArray_DIM(a, 1) > INT32_MAX)
        return NULL;
    return a;
}

/* Layout of a read-only operand: 'F' Fortran-contiguous, 'C' C-contiguous only, 0 neither. */
static char
layout(PyArrayObject *a)
{
    if (PyArray_IS_F_CONTIGUOUS(a)) return 'F';
    if (PyArray_IS_C_CONTIGUOUS(a)) return 'C';
    return 0;
}

/* dst (Fortran order, leading dimension ldd elements) = the rows x cols piece of src whose element (i, j)
 * lies i * rs + j * cs bytes from src; conjugated where conj (complex precisions).  In 32 x 32 blocks, so
 * that a transposing copy (a C-ordered source) reads and writes whole cache lines: NumPy's C-to-Fortran
 * copy takes 5-10x a plain copy's time from order 512 on. */
#define COPY_BLOCK 32
typedef struct { uint64_t lo, hi; } element16; /* a complex128 moved whole */
/* The blocked loop; STEP elements of T per matrix element, MOVE(y, x, T) moves one (x: its source bytes). */
#define COPY_PIECE(T, STEP, MOVE)                                                                    \
    do {                                                                                             \
        for (npy_intp j0 = 0; j0 < cols; j0 += COPY_BLOCK)                                           \
            for (npy_intp i0 = 0; i0 < rows; i0 += COPY_BLOCK) {                                     \
                npy_intp i1 = i0 + COPY_BLOCK < rows ? i0 + COPY_BLOCK : rows;                       \
                npy_intp j1 = j0 + COPY_BLOCK < cols ? j0 + COPY_BLOCK : cols;                       \
                for (npy_intp j = j0; j < j1; j++) { /* down a column of dst: contiguous stores */     \
                    const char *x = src + i0 * rs + j * cs;                                          \
                    T *y = (T *)dst + (STEP) * (i0 + j * ldd);                                       \
                    for (npy_intp i = i0; i < i1; i++, x += rs, y += (STEP)) MOVE(y, x, T);          \
                }                                                                                    \
            }                                                                                        \
    } while (0)

/* Bytes per element of precision prec (s, d, c, z). */
static size_t
elsize(int prec)
{
    return prec == 0 ? 4 : prec == 3 ? 16 : 8;
}

static void
copy_piece(char *dst, npy_intp ldd, const char *src, npy_intp rs, npy_intp cs, npy_intp rows, npy_intp cols,
           int prec, int conj)
{
    if (rs < cs) {  /* source columns contiguous: column by column */
        npy_intp es = (npy_intp)elsize(prec);
        if (rs == es && !conj) {
            for (npy_intp j = 0; j < cols; j++)
                memcpy(dst + j * ldd * es, src + j * cs, (size_t)(rows * es));
            return;
        }
    }
    /* without conjugation an element moves whole (one load and one store: a complex64 as 8 bytes, a
     * complex128 as a 16-byte struct; a memcpy of a fixed size, so any alignment of the source is fine) */
#define WHOLE(y, x, T) memcpy(y, x, sizeof(T))
#define CONJ(y, x, T) (y[0] = ((const T *)(x))[0], y[1] = -((const T *)(x))[1])
    switch (prec) {
    case 0: COPY_PIECE(uint32_t, 1, WHOLE); break;
    case 1: COPY_PIECE(uint64_t, 1, WHOLE); break;
    case 2: if (conj) COPY_PIECE(float, 2, CONJ); else COPY_PIECE(uint64_t, 1, WHOLE); break;
    default: if (conj) COPY_PIECE(double, 2, CONJ); else COPY_PIECE(element16, 1, WHOLE); break;
    }
#undef WHOLE
#undef CONJ
}

/* Conjugate elements i0..i1 of column j of the Fortran-ordered c (leading dimension ldc) of a complex
 * precision. */
static void
conj_column(char *c, npy_intp ldc, npy_intp j, npy_intp i0, npy_intp i1, int prec)
{
    if (prec == 2) {
        float *x = (float *)c + 2 * j * ldc;
        for (npy_intp i = i0; i < i1; i++) x[2 * i + 1] = -x[2 * i + 1];
    }
    else {
        double *x = (double *)c + 2 * j * ldc;
        for (npy_intp i = i0; i < i1; i++) x[2 * i + 1] = -x[2 * i + 1];
    }
}

/* Conjugate the rows x cols Fortran-ordered piece at c (leading dimension ldc) of a complex precision. */
static void
conj_piece(char *c, npy_intp ldc, npy_intp rows, npy_intp cols, int prec)
{
    for (npy_intp j = 0; j < cols; j++) conj_column(c, ldc, j, 0, rows, prec);
}

/* Conjugate the strictly lower (lower) or upper triangle of the n x n Fortran-ordered c (leading
 * dimension ldc) of a complex precision; the diagonal of a Hermitian result is real and stays as it is. */
static void
conj_triangle(char *c, npy_intp ldc, npy_intp n, int lower, int prec)
{
    for (npy_intp j = 0; j < n; j++) conj_column(c, ldc, j, lower ? j + 1 : 0, lower ? n : j, prec);
}

/* Zero the strict triangle of the n x n c (Fortran order, leading dimension ldc elements of es bytes)
 * opposite the stored one (lower: the stored triangle is the lower one). */
static void
zero_other_triangle(char *c, npy_intp ldc, npy_intp n, int lower, size_t es)
{
    for (npy_intp j = 0; j < n; j++) {
        if (lower) memset(c + (size_t)(j * ldc) * es, 0, (size_t)j * es);
        else memset(c + (size_t)(j * ldc + j + 1) * es, 0, (size_t)(n - j - 1) * es);
    }
}

/* The conjugate of a scalar of a complex precision, in place. */
static void
conj_scalar(scalar_t *v, int prec)
{
    if (prec == 2) v->cf[1] = -v->cf[1];
    else v->cd[1] = -v->cd[1];
}

/* ------------------------------------------------------------------------ arrays the path makes
 *
 * Every array this path makes (a result, a copy of an operand) starts on a 64-byte boundary.  NumPy's
 * default allocation is malloc's, 16-byte aligned: where the copy of b of a small trsm (in place on it)
 * starts 16, 32 or 48 bytes past a cache line, OpenBLAS's kernels ran ztrsm n = 32 in 9.1 us against 7.3 us
 * on a line's start; which of the two a call got depended on the heap, so on the process.  The arrays
 * are NumPy's own in every other way: they own their data and free it through the handler below, which
 * NumPy keeps with each (a resize goes through it too); NumPy's allocator for the caller's arrays is
 * left as it is. */
#define ARRAY_ALIGN 64
#define NUMPY_TRACE_DOMAIN 389047 /* numpy.lib.tracemalloc_domain */
/* Each block is one malloc (calloc) of size + HEADER bytes; the data starts on the first boundary at
 * least two words in, the words just below it keep the block's start and the data's size (a realloc
 * needs it).  glibc's posix_memalign cost 600 instructions a call more than malloc. */
#define HEADER (ARRAY_ALIGN + 2 * sizeof(void *))

static void *
place(char *raw, size_t size)
{
    char *p;
    if (raw == NULL) return NULL;
    p = (char *)(((uintptr_t)raw + 2 * sizeof(void *) + ARRAY_ALIGN - 1) & ~(uintptr_t)(ARRAY_ALIGN - 1));
    ((void **)p)[-1] = raw;
    ((size_t *)p)[-2] = size;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* as NumPy advises its own large arrays: huge pages for what lies on whole pages */
    if (size >= ((size_t)1 << 22)) {
        uintptr_t lo = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, hi = ((uintptr_t)p + size) & ~(uintptr_t)4095;
        if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    }
#endif
    return p;
}

static void *
aligned_malloc(void *ctx, size_t size)
{
    (void)ctx;
    return size > SIZE_MAX - HEADER ? NULL : place(malloc(size + HEADER), size);
}

static void *
aligned_calloc(void *ctx, size_t nelem, size_t elsize)
{
    size_t size;
    (void)ctx;
    if (elsize && nelem > SIZE_MAX / elsize) return NULL;
    size = nelem * elsize;
    return size > SIZE_MAX - HEADER ? NULL : place(calloc(1, size + HEADER), size);
}

static void
aligned_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    (void)size;
    if (ptr != NULL) free(((void **)ptr)[-1]);
}

static void *
aligned_realloc(void *ctx, void *ptr, size_t size)
{
    void *p;
    size_t old;
    if (ptr == NULL) return aligned_malloc(ctx, size);
    if ((p = aligned_malloc(ctx, size)) == NULL) return NULL;  /* ptr kept, as realloc keeps it */
    old = ((size_t *)ptr)[-2];
    memcpy(p, ptr, old < size ? old : size);
    aligned_free(ctx, ptr, old);
    return p;
}

static PyDataMem_Handler aligned_handler = {
    "tileblas_aligned64", 1, {NULL, aligned_malloc, aligned_calloc, aligned_realloc, aligned_free}};
static PyObject *aligned_capsule = NULL; /* the handler as NumPy takes it (made at import) */

/* A new array of nd dims of the type, Fortran-ordered when fortran, zeros when zero, else uninitialised,
 * its data on a 64-byte boundary (a new reference; NULL with an exception on failure).  The data is
 * allocated here and handed to the array with this handler, as NumPy does for its own (owned data, the
 * handler kept with it for a resize or the free); making NumPy allocate through it instead, by setting
 * it in force around the call, cost 2,700 more instructions an array than this (two context-variable
 * writes). */
static PyArrayObject *
new_array(int nd, npy_intp *dims, int typenum, int fortran, int zero)
{
    PyArray_Descr *descr = PyArray_DescrFromType(typenum);
    PyObject *r;
    size_t nbytes;
    void *data;
    if (descr == NULL) return NULL;
    nbytes = (size_t)PyDataType_ELSIZE(descr);
    for (int i = 0; i < nd; i++) {
        if (dims[i] < 0 || (dims[i] && nbytes > SIZE_MAX / (size_t)dims[i])) {
            Py_DECREF(descr);
            PyErr_NoMemory();
            return NULL;
        }
        nbytes *= (size_t)dims[i];
    }
    data = zero ? aligned_calloc(NULL, nbytes, 1) : aligned_malloc(NULL, nbytes);
    if (data == NULL) {
        Py_DECREF(descr);
        PyErr_NoMemory();
        return NULL;
    }
    /* steals descr */
    r = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, NULL, data,
                             NPY_ARRAY_WRITEABLE | (fortran ? NPY_ARRAY_F_CONTIGUOUS : NPY_ARRAY_C_CONTIGUOUS), NULL);
    if (r == NULL) {
        aligned_free(NULL, data, nbytes);
        return NULL;
    }
    PyArray_ENABLEFLAGS((PyArrayObject *)r, NPY_ARRAY_OWNDATA);
    /* traced as NumPy traces its own data (it untraces it at the free) */
    PyTraceMalloc_Track(NUMPY_TRACE_DOMAIN, (uintptr_t)data, nbytes);
    Py_INCREF(aligned_capsule);
    ((PyArrayObject_fields *)r)->mem_handler = aligned_capsule;
    return (PyArrayObject *)r;
}

/* A new Fortran-ordered array of a's shape and type, uninitialised (a new reference; NULL with an
 * exception on failure). */
static PyArrayObject *
fortran_empty(PyArrayObject *a)
{
    return new_array(PyArray_NDIM(a), PyArray_DIMS(a), PyArray_TYPE(a), 1, 0);
}

/* A new Fortran-ordered copy of any array (a new reference; NULL with an exception on failure). */
static PyArrayObject *
fortran_copy(PyArrayObject *a)
{
    PyArrayObject *c = fortran_empty(a);
    if (c != NULL && PyArray_CopyInto(c, a) < 0) Py_CLEAR(c);
    return c;
}

/* A new Fortran-ordered copy of a plain matrix of precision prec, conjugated where conj (a new reference,
 * NULL with an exception set on failure). */
static PyArrayObject *
fortran_copy_as(PyArrayObject *a, int prec, int conj)
{
    PyArrayObject *c;
    if ((c = fortran_empty(a)) == NULL) return NULL;
    copy_piece(PyArray_BYTES(c), PyArray_DIM(c, 0), PyArray_BYTES(a), PyArray_STRIDE(a, 0), PyArray_STRIDE(a, 1),
               PyArray_DIM(a, 0), PyArray_DIM(a, 1), prec, conj);
    return c;
}

/* Whether an output c given with overwrite set is written in place (else the call writes a copy). */
static int
writes_in_place(PyArrayObject *c, int overwrite)
{
    return overwrite && PyArray_IS_F_CONTIGUOUS(c) && PyArray_ISWRITEABLE(c);
}

static int
overlaps(PyArrayObject *a, PyArrayObject *b)
{
    char *a0 = PyArray_BYTES(a), *b0 = PyArray_BYTES(b);
    char *a1 = a0 + PyArray_NBYTES(a), *b1 = b0 + PyArray_NBYTES(b);
    return a0 < b1 && b0 < a1;
}

/* The output: *given* updated in place when allowed, else a new Fortran array (zeros when ``zero``,
 * else uninitialised, when *given* is None; a copy of *given* otherwise).  NULL + no exception: Python
 * path; NULL + exception: error.  An input that shares memory with an in-place output is read from a copy
 * of its own (same layout), as the Python path does: ``inputs[i]`` is replaced by it, a new reference kept
 * in ``copies[i]`` for the caller to release. */
static PyArrayObject *
output(PyObject *given, int prec, int overwrite, npy_intp m, npy_intp n, int zero,
       PyArrayObject **inputs, int ninputs, PyArrayObject **copies)
{
    PyArrayObject *c;
    if (given == Py_None) {
        npy_intp dims[2] = {m, n};
        return new_array(2, dims, TYPENUM[prec], 1, zero);
    }
    c = plain_matrix(given, prec);
    if (c == NULL || PyArray_DIM(c, 0) != m || PyArray_DIM(c, 1) != n) return NULL;
    if (writes_in_place(c, overwrite)) {
        for (int i = 0; i < ninputs; i++)
            if (overlaps(c, inputs[i])) {
                PyArrayObject *cp = (PyArrayObject *)PyArray_NewCopy(inputs[i], NPY_KEEPORDER);
                if (cp == NULL) return NULL;
                Py_XDECREF(copies[i]);
                copies[i] = inputs[i] = cp;
            }
        Py_INCREF(c);
        return c;
    }
    return fortran_copy_as(c, prec, 0);
}

/* ----------------------------------------------------------------------------------- native calls */

typedef void (*gemm_t)(const char *, const char *, const int *, const int *, const int *, const void *,
                       const void *, const int *, const void *, const int *, const void *, void *,
                       const int *, size_t, size_t);
typedef void (*symm_t)(const char *, const char *, const int *, const int *, const void *, const void *,
                       const int *, const void *, const int *, const void *, void *, const int *, size_t,
                       size_t);
typedef void (*syrk_t)(const char *, const char *, const int *, const int *, const void *, const void *,
                       const int *, const void *, void *, const int *, size_t, size_t);
typedef void (*syr2k_t)(const char *, const char *, const int *, const int *, const void *, const void *,
                        const int *, const void *, const int *, const void *, void *, const int *, size_t,
                        size_t);
typedef void (*trmm_t)(const char *, const char *, const char *, const char *, const int *, const int *,
                       const void *, const void *, const int *, void *, const int *, size_t, size_t,
                       size_t, size_t);

static int
ld(PyArrayObject *a)  /* leading dimension of a Fortran-contiguous operand */
{
    npy_intp r = PyArray_DIM(a, 0);
    return (int)(r > 1 ? r : 1);
}

/* ------------------------------------------------------------------------------------- the front */
/*
 * A routine of tileblas.blas is one of the objects below with a front: called as users call it
 * (positionally or by keyword, defaults left out), it binds the arguments to the routine's parameters
 * in C, runs the small-call path, and hands the call as it was made to the Python implementation
 * (``fallback``) wherever the path declines -- including every binding it does not do itself (unknown
 * or repeated keywords, too many arguments), so that Python raises its usual errors.  No Python frame
 * stands between a small call and BLAS.
 */

/* The arguments of a call bound to all ``want`` parameters of ``f`` in ``slot`` (borrowed references);
 * NULL when this front does not bind them (the fallback then takes the call). */
static PyObject *const *
bind_args(const Front *f, Py_ssize_t want, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
          PyObject **slot)
{
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames), ndef, i, j;
    if (nkw == 0 && nargs == want) return args;
    if (f->names == NULL || nargs > want || want > MAX_PARAMS) return NULL;
    for (i = 0; i < want; i++) slot[i] = i < nargs ? args[i] : NULL;
    for (j = 0; j < nkw; j++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, j);
        for (i = 0; i < want; i++) {
            PyObject *name = PyTuple_GET_ITEM(f->names, i);
            if (name == key) break;
        }
        if (i == want) {  /* not interned the same: compare the text */
            for (i = 0; i < want; i++)
                if (PyUnicode_Compare(PyTuple_GET_ITEM(f->names, i), key) == 0) break;
            if (PyErr_Occurred()) { PyErr_Clear(); return NULL; }
        }
        if (i == want || slot[i] != NULL) return NULL;
        slot[i] = args[nargs + j];
    }
    ndef = PyTuple_GET_SIZE(f->defaults);
    for (i = 0; i < want; i++) {
        if (slot[i] != NULL) continue;
        if (i < want - ndef) return NULL;  /* a required argument missing */
        slot[i] = PyTuple_GET_ITEM(f->defaults, i - (want - ndef));
    }
    return slot;
}

/* The call as it was made, by the Python implementation; NotImplemented for a bare path. */
static PyObject *
fall_back(const Front *f, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (f->fallback == NULL) Py_RETURN_NOTIMPLEMENTED;
    return PyObject_Vectorcall(f->fallback, args, nargsf, kwnames);
}

/* front_init(f, fallback, names, defaults, want, what): check and keep them; -1 with an exception. */
static int
front_init(Front *f, PyObject *fallback, PyObject *names, PyObject *defaults, Py_ssize_t want, const char *what)
{
    if (fallback == NULL || fallback == Py_None) return 0;
    if (!PyCallable_Check(fallback)) {
        PyErr_Format(PyExc_TypeError, "%s: fallback must be callable, got %R", what, fallback);
        return -1;
    }
    if (names == NULL || !PyTuple_Check(names) || PyTuple_GET_SIZE(names) != want) {
        PyErr_Format(PyExc_ValueError, "%s: names must be a tuple of its %zd parameter names, got %R", what, want,
                     names == NULL ? Py_None : names);
        return -1;
    }
    if (defaults == NULL || defaults == Py_None) defaults = PyTuple_New(0);
    else {
        if (!PyTuple_Check(defaults) || PyTuple_GET_SIZE(defaults) > want) {
            PyErr_Format(PyExc_ValueError, "%s: defaults must be a tuple of at most %zd values, got %R", what, want,
                         defaults);
            return -1;
        }
        Py_INCREF(defaults);
    }
    if (defaults == NULL) return -1;
    f->names = PyTuple_New(want);
    if (f->names == NULL) { Py_DECREF(defaults); return -1; }
    for (Py_ssize_t i = 0; i < want; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (!PyUnicode_CheckExact(name)) {
            PyErr_Format(PyExc_TypeError, "%s: parameter names must be str, got %R", what, name);
            Py_CLEAR(f->names);
            Py_DECREF(defaults);
            return -1;
        }
        Py_INCREF(name);
        PyUnicode_InternInPlace(&name);
        PyTuple_SET_ITEM(f->names, i, name);
    }
    f->defaults = defaults;
    Py_INCREF(fallback);
    f->fallback = fallback;
    return 0;
}

static int
front_traverse(Front *f, visitproc visit, void *arg)
{
    Py_VISIT(f->fallback);
    Py_VISIT(f->names);
    Py_VISIT(f->defaults);
    Py_VISIT(f->dict);
    return 0;
}

static void
front_clear(Front *f)
{
    Py_CLEAR(f->fallback);
    Py_CLEAR(f->names);
    Py_CLEAR(f->defaults);
    Py_CLEAR(f->dict);
}

/* The call of every routine object: bind, run the small-call path, else hand the call to the fallback. */
static PyObject *
routine_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Routine *self = (Routine *)callable;
    PyObject *slot[MAX_PARAMS];
    PyObject *const *bound = bind_args(&self->front, self->nparams, args, PyVectorcall_NARGS(nargsf), kwnames,
                                       slot);
    if (bound != NULL) {
        PyObject *r = self->small(self, bound);
        if (r != Py_NotImplemented) return r;  /* the result, or an error */
        Py_DECREF(r);
    }
    return fall_back(&self->front, args, nargsf, kwnames);
}

/* A new routine object's common part: its path and its front (-1 with an exception; the caller then
 * drops the object). */
static int
routine_init(Routine *self, PyObject *(*small)(Routine *, PyObject *const *), Py_ssize_t nparams,
             PyObject *fallback, PyObject *names, PyObject *defaults, const char *what)
{
    self->vectorcall = routine_vectorcall;
    self->small = small;
    self->nparams = nparams;
    return front_init(&self->front, fallback, names, defaults, nparams, what);
}

static int
routine_traverse(Routine *self, visitproc visit, void *arg)
{
    return front_traverse(&self->front, visit, arg);
}

static int
routine_clear(Routine *self)
{
    front_clear(&self->front);
    return 0;
}

static void
routine_dealloc(Routine *self)
{
    PyObject_GC_UnTrack(self);
    front_clear(&self->front);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ------------------------------------------------------------------------------------ the routines */

#define NOT_HANDLED goto python
#define FAIL goto error
#define RUN3(stmt) RUN_IF(flops > GIL_FLOPS, stmt)
/* tileblas.kernels._pool's C API (_pool.h), where it is built */
static const PoolAPI *pool_api = NULL;

/* gemm/symm/hemm split into independent parts of C (trmm/trsm: of b), each one call on the one-thread
 * instance, run at once on the pool's workers: for the routines and flops set by set_split (OpenBLAS's
 * own threading of these scales worse on two threads than two independent halves do) */
#define MAX_SPLIT 64
static int split_slot = -1;
static unsigned long long split_calls = 0; /* calls run split (counted under the GIL) */
/* openblas_get_num_threads of the instance of that slot: the thread setting in force (threadpoolctl) */
static int (*split_threads)(void) = NULL;
static double split_lo[9][4], split_hi[9][4];

/* One part: a gemm (f1, f2 = transa, transb), a symm/hemm (f1, f2 = side, uplo; k unused) or a trmm/trsm
 * (tri: f1-f4 = side, uplo, transa, diag; on c, b = c).  A symm/hemm or trmm/trsm part may first fill its m x n piece of b (Fortran order) from bsrc (element (i, j) at i * bsr + j * bsc
 * bytes), conjugated where bconj; and conjugate its piece of c after the call (cconj; before it as well
 * where cpre): conj(A) conj(B) is conj(A B), the way a C-ordered Hermitian a is used without a copy. */
typedef struct {
    void *fn;
    int gemm, prec;
    char f1, f2, f3, f4; /* f3, f4: trans_a and diag of a trmm/trsm part (tri) */
    int tri;
    int m, n, k, lda, ldb, ldc;
    scalar_t alpha, beta;
    char *a, *b, *c;
    const char *bsrc;
    npy_intp bsr, bsc;
    int bconj, cconj, cpre;
} SplitJob;

static void
split_job(int i, void *p, int unused)
{
    SplitJob *j = (SplitJob *)p;
    (void)i;
    (void)unused;
    if (j->bsrc != NULL) copy_piece(j->b, j->ldb, j->bsrc, j->bsr, j->bsc, j->m, j->n, j->prec, j->bconj);
    if (j->cpre) conj_piece(j->c, j->ldc, j->m, j->n, j->prec);
    if (j->tri)  /* trmm/trsm on its piece of the output (b = c there), filled from bsrc first */
        ((trmm_t)j->fn)(&j->f1, &j->f2, &j->f3, &j->f4, &j->m, &j->n, &j->alpha, j->a, &j->lda, j->c, &j->ldc, 1, 1,
                        1, 1);
    else if (j->gemm)
        ((gemm_t)j->fn)(&j->f1, &j->f2, &j->m, &j->n, &j->k, &j->alpha, j->a, &j->lda, j->b, &j->ldb, &j->beta,
                        j->c, &j->ldc, 1, 1);
    else
        ((symm_t)j->fn)(&j->f1, &j->f2, &j->m, &j->n, &j->alpha, j->a, &j->lda, j->b, &j->ldb, &j->beta, j->c,
                        &j->ldc, 1, 1);
    if (j->cconj) conj_piece(j->c, j->ldc, j->m, j->n, j->prec);
}

/* How many parts a call of family fam splits into where set_split asks for it: one per thread of the
 * pool's instance, at most `most`; 0 where it is not split (outside its flops, one-thread entries
 * missing, fewer than two parts).  A function of the call and the settings alone. */
static int
split_parts(int fam, int prec, double flops, int most)
{
    int jobs;
    if (split_slot < 0 || pool_api == NULL || !(flops >= split_lo[fam][prec] && flops < split_hi[fam][prec]) ||
        flops < one_limits[fam] /* one thread below its limit */ ||
        entry1[fam][prec] == NULL || entry1[GEMM][prec] == NULL || split_threads == NULL)
        return 0;
    jobs = split_threads();
    if (jobs > MAX_SPLIT) jobs = MAX_SPLIT;
    if (jobs > most) jobs = most;
    return jobs < 2 ? 0 : jobs;
}

/* Run the parts `job` (jobs of elsize bytes) on the calling thread and the pool's workers, claimed by
 * whichever comes first (_pool.h), the GIL released: 1 when done, 0 when none was run (no such slot). */
static int
run_parts(pool_job_fn dojob, void *job, int jobs, size_t elsize)
{
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pool_api->run_parts(split_slot, dojob, jobs, elsize, job);
    Py_END_ALLOW_THREADS
    if (rc < 0) return 0;
    split_calls++;
    return 1;
}

/* The least part of a split along an order: an eighth of it, 16 at least (every part packs all of the
 * other operand: thinner parts spend more on that than they gain). */
static int
least_part(int order)
{
    return order / 8 > 16 ? order / 8 : 16;
}

/* Run the call `whole` split where set_split asks for it: parts along its `len` rows (rows) or columns,
 * each at least `least` long, part i's b and c advanced by bstep and cstep bytes per row or column
 * before it.  1 when done; 0 (nothing written) where the call is not split. */
static int
run_split(int fam, int prec, double flops, const SplitJob *whole, int len, int least, int rows, size_t bstep,
          size_t cstep)
{
    SplitJob job[MAX_SPLIT];
    int jobs = split_parts(fam, prec, flops, len / least), done = 0;
    if (jobs == 0) return 0;
    for (int i = 0; i < jobs; i++) {
        int part = len / jobs + (i < len % jobs);
        job[i] = *whole;
        job[i].fn = entry1[fam][prec];
        if (rows) job[i].m = part;
        else job[i].n = part;
        job[i].b += (size_t)done * bstep;
        job[i].c += (size_t)done * cstep;
        if (job[i].bsrc != NULL) job[i].bsrc += done * (rows ? whole->bsr : whole->bsc);
        done += part;
    }
    return run_parts(split_job, job, jobs, sizeof(SplitJob));
}

/* syrk/herk/syr2k/her2k split: the stored triangle of C in strips, one per thread, each a diagonal block
 * (a rank-k update of its own) and the rectangle beside it (one gemm; two for the 2k routines) between
 * it and the diagonal's start: rows r0..r1 and columns 0..r0 for uplo L, the transpose for U.  Strip
 * bounds n sqrt(i / jobs) give each the same flops.  The call's flags as the rank-k routine takes them
 * (after any transposition: trans 'N' has op(a) = a, n x k, else a is k x n); cconj/cpre conjugate the
 * strip's part of c after (and before) the calls, as the single call would do to the whole triangle. */
typedef struct {
    void *rk, *gm;
    int two, herm, prec;
    char uplo, trans;
    int n, k, lda, ldb, ldc, r0, r1;
    scalar_t alpha, beta;
    char *a, *b, *c;
    int cconj, cpre;
} RankJob;

static void
rank_conj(const RankJob *j, size_t es)
{
    int w = j->r1 - j->r0;
    char *c = j->c;
    conj_triangle(c + ((size_t)j->r0 + (size_t)j->r0 * j->ldc) * es, j->ldc, w, j->uplo == 'L', j->prec);
    if (j->r0 > 0) {
        if (j->uplo == 'L') conj_piece(c + (size_t)j->r0 * es, j->ldc, w, j->r0, j->prec);
        else conj_piece(c + (size_t)j->r0 * j->ldc * es, j->ldc, j->r0, w, j->prec);
    }
}

static void
rank_job(int i, void *p, int unused)
{
    RankJob *j = (RankJob *)p;
    size_t es = elsize(j->prec);
    int w = j->r1 - j->r0, r0 = j->r0;
    char h = j->herm ? 'C' : 'T', nn = 'N';
    /* op(x) rows r0..: x + r0 (trans 'N'), else columns r0.. of the k x n x */
    size_t off = j->trans == 'N' ? (size_t)r0 * es : (size_t)r0 * j->lda * es;
    size_t offb = j->trans == 'N' ? (size_t)r0 * es : (size_t)r0 * j->ldb * es;
    char *cd = j->c + ((size_t)r0 + (size_t)r0 * j->ldc) * es;
    /* gemm's scalars: herk's real alpha and herk/her2k's real beta as complex ones (real scalars are
     * stored in the first component); the second gemm of her2k takes conj(alpha) and beta 1 */
    scalar_t ga = j->alpha, gb = j->beta, ga2, g1;
    (void)i;
    (void)unused;
    memset(&g1, 0, sizeof g1);
    if (j->prec == 0 || j->prec == 2) g1.f = 1.0f;
    else g1.d = 1.0;
    if (j->herm) {
        if (j->prec == 2) { gb.cf[1] = 0.0f; if (!j->two) ga.cf[1] = 0.0f; }
        else { gb.cd[1] = 0.0; if (!j->two) ga.cd[1] = 0.0; }
    }
    ga2 = ga;
    if (j->herm && j->two) conj_scalar(&ga2, j->prec);
    if (j->cpre) rank_conj(j, es);
    if (j->two)
        ((syr2k_t)j->rk)(&j->uplo, &j->trans, &w, &j->k, &j->alpha, j->a + off, &j->lda, j->b + offb, &j->ldb,
                         &j->beta, cd, &j->ldc, 1, 1);
    else
        ((syrk_t)j->rk)(&j->uplo, &j->trans, &w, &j->k, &j->alpha, j->a + off, &j->lda, &j->beta, cd, &j->ldc, 1,
                        1);
    if (r0 > 0) {
        /* L: C[r0:r1, :r0] = op(a)[r0:r1] op(b)[:r0]^H (+ op(b)[r0:r1] op(a)[:r0]^H);
         * U: C[:r0, r0:r1] = op(a)[:r0] op(b)[r0:r1]^H (+ ...) */
        int lower = j->uplo == 'L', m = lower ? w : r0, n = lower ? r0 : w;
        char ta = j->trans == 'N' ? nn : h, tb = j->trans == 'N' ? h : nn;
        char *cr = j->c + (lower ? (size_t)r0 * es : (size_t)r0 * j->ldc * es);
        char *x1 = lower ? j->a + off : j->a, *y1 = lower ? (j->two ? j->b : j->a) : (j->two ? j->b + offb : j->a + off);
        int ldy = j->two ? j->ldb : j->lda;
        ((gemm_t)j->gm)(&ta, &tb, &m, &n, &j->k, &ga, x1, &j->lda, y1, &ldy, &gb, cr, &j->ldc,
                        1, 1);
        if (j->two) {
            char *x2 = lower ? j->b + offb : j->b, *y2 = lower ? j->a : j->a + off;
            ((gemm_t)j->gm)(&ta, &tb, &m, &n, &j->k, &ga2, x2, &j->ldb, y2, &j->lda, &g1, cr, &j->ldc, 1, 1);
        }
    }
    if (j->cconj) rank_conj(j, es);
}

/* Run a rank-k call split where set_split asks for it (1), else nothing written (0). */
static int
run_rank_split(int fam, int prec, double flops, const RankJob *whole)
{
    RankJob job[MAX_SPLIT];
    int jobs = split_parts(fam, prec, flops, whole->n / 16);
    if (jobs == 0) return 0;
    for (int i = 0; i < jobs; i++) {
        job[i] = *whole;
        job[i].rk = entry1[fam][prec];
        job[i].gm = entry1[GEMM][prec];
        job[i].r0 = (int)(whole->n * sqrt((double)i / jobs) + 0.5);
        job[i].r1 = i + 1 == jobs ? whole->n : (int)(whole->n * sqrt((double)(i + 1) / jobs) + 0.5);
    }
    return run_parts(rank_job, job, jobs, sizeof(RankJob));
}

/* The entry point of a call of family fam, precision prec and these flops: the one-thread instance's
 * below the family's one-thread limit, else the instance of the path's thread count. */
static void *
pick_entry(int fam, int prec, double flops)
{
    if (entry1[fam][prec] != NULL && flops < one_limits[fam])
        return entry1[fam][prec];
    return entry[fam][prec];
}

/* Real syrk/syr2k with trans 'N' (after any transposition) and a new c (c None, beta zero) below
 * rank_gemm[family][precision][split] flops (n (n + 1) k, 2x for syr2k; set_rank_gemm; [1] where the
 * gemms run split on the pool, [0] where they run as one call): one gemm (two for syr2k) over the whole
 * n x n C instead of the rank-k call, the other triangle zeroed after.  OpenBLAS's
 * gemm has small-matrix kernels (a product of up to about 100^3 is computed without packing); its
 * syrk/syr2k drivers pack and walk the triangle block by block, so that at small orders they take longer
 * than gemm takes for twice the flops.  Not for trans 'T' (gemm 'T', 'N' is slower there) nor for a c
 * given (a scratch copy of c cost what gemm saved).  Measured: see tileblas.blas._dispatch.RANK_GEMM_FLOPS. */
static double rank_gemm[NFAM][4][2];
static unsigned long long rank_gemm_calls = 0; /* calls that took it (counted under the GIL) */

/* The work of the gemm route on columns j0..j1 of C (all of them, or one part of a split): the gemm of
 * those columns (two for syr2k: alpha a b^T + alpha b a^T), then their part of the other triangle zeroed.
 * Each part does both for its own columns on its own thread: C written by one thread and zeroed by
 * another cost more than the gemm (dsyrk of order 64: 8.3 us against 4.1 us). */
typedef struct {
    void *fn;
    int prec, two, lower;
    int n, k, lda, ldb, ldc, j0, j1;
    scalar_t alpha;
    char *a, *b, *c;
} RankGemmJob;

static void
rank_gemm_job(int i, void *p, int unused)
{
    RankGemmJob *j = (RankGemmJob *)p;
    size_t es = elsize(j->prec);
    int w = j->j1 - j->j0, ldy = j->two ? j->ldb : j->lda;
    char *y = j->two ? j->b : j->a, *cj = j->c + (size_t)j->j0 * j->ldc * es, ta = 'N', tb = 'T';
    scalar_t zero, one;
    (void)i;
    (void)unused;
    memset(&zero, 0, sizeof zero);
    one = zero;
    if (j->prec == 0) one.f = 1.0f;
    else one.d = 1.0;
    /* columns j0.. of C take rows j0.. of the n x k a and b (columns of a^T, b^T) */
    ((gemm_t)j->fn)(&ta, &tb, &j->n, &w, &j->k, &j->alpha, j->a, &j->lda, y + j->j0 * es, &ldy, &zero, cj, &j->ldc,
                    1, 1);
    if (j->two)
        ((gemm_t)j->fn)(&ta, &tb, &j->n, &w, &j->k, &j->alpha, j->b, &j->ldb, j->a + j->j0 * es, &j->lda, &one, cj,
                        &j->ldc, 1, 1);
    for (int c = j->j0; c < j->j1; c++) {
        char *col = j->c + (size_t)c * j->ldc * es;
        if (j->lower) memset(col, 0, (size_t)c * es);
        else memset(col + (size_t)(c + 1) * es, 0, (size_t)(j->n - c - 1) * es);
    }
}

/* How many column parts the gemm route of a rank-k call of rank-k flops rkflops runs in (split_parts of
 * its gemms), or -1 where the rank-k call is to be made instead. */
static int
rank_gemm_parts(int fam, int prec, double rkflops, int n, int k)
{
    int jobs;
    if (!(rkflops < rank_gemm[fam][prec][1]) || entry[GEMM][prec] == NULL) return -1;
    jobs = split_parts(GEMM, prec, 2.0 * n * n * k, n / least_part(n));
    return jobs > 0 || rkflops < rank_gemm[fam][prec][0] ? jobs : -1;
}

/* The rank-k call with trans 'N' (a, b n x k) into the new c by gemm: in `jobs` column parts at once on the
 * pool (rank_gemm_parts), else as one call on the instance its flops pick. */
static void
rank_by_gemm(int prec, int two, int lower, int n, int k, const scalar_t *alpha, char *a, int lda, char *b, int ldb,
             char *c, int ldc, int jobs)
{
    double flops = 2.0 * n * n * k;  /* of one gemm: the split and the instance go by gemm's own limits */
    RankGemmJob whole = {.fn = entry[GEMM][prec], .prec = prec, .two = two, .lower = lower, .n = n, .k = k,
                         .lda = lda, .ldb = ldb, .ldc = ldc, .j0 = 0, .j1 = n, .alpha = *alpha, .a = a, .b = b,
                         .c = c};
    RankGemmJob job[MAX_SPLIT];
    int done = 0;
    rank_gemm_calls++;
    for (int i = 0; i < jobs; i++) {
        int part = n / jobs + (i < n % jobs);
        job[i] = whole;
        job[i].fn = entry1[GEMM][prec];
        job[i].j0 = done;
        job[i].j1 = done += part;
    }
    if (jobs > 0 && run_parts(rank_gemm_job, job, jobs, sizeof(RankGemmJob))) return;
    whole.fn = pick_entry(GEMM, prec, flops);
    RUN_IF(flops > GIL_FLOPS, rank_gemm_job(0, &whole, 0));
}

/* Whether a runtime is in force in this context (``with tileblas.Runtime(...)``): its calls are the
 * runtime's (the Python path); also where that cannot be read. */
static int
runtime_in_force(void)
{
    PyObject *cur = NULL;
    if (current_var == NULL) return 0;
    if (PyContextVar_Get(current_var, Py_None, &cur) < 0) {
        PyErr_Clear();
        return 1;
    }
    Py_XDECREF(cur);
    return cur != Py_None;
}

/* Whether the C path is closed to this routine's calls now: off, no entry point, declined in this thread,
 * or a runtime in force. */
static int
level3_closed(Level3Object *self)
{
    return !enabled || entry[self->fam][self->prec] == NULL || (declining && declined) || runtime_in_force();
}

/* The most elements of an operand the C path converts itself.  Beyond it the Python path converts (its
 * fixed cost is then below 1 % of the call: dgemm of order 512 takes 4 ms here), and a call that the C path
 * leaves to the runtime or the recursion after all (a trsm of order 1024 with 64 right-hand sides) is not
 * converted twice; huge arrays (2^31 elements) are refused by the Python path before any copy. */
#define CONVERT_MAX (1 << 18)

/* A new Fortran-ordered copy of a in the dtype of precision prec, where a's dtype converts as the Python
 * path converts it (real, integer or bool to any; complex to complex: astype(dtype, order='F')); a new
 * reference, or NULL (no exception) where it does not. */
static PyObject *
cast_copy(PyArrayObject *a, int prec)
{
    int kind = PyArray_DESCR(a)->kind;
    PyArrayObject *r;
    if (!(kind == 'b' || kind == 'i' || kind == 'u' || kind == 'f' || (kind == 'c' && prec >= 2))) return NULL;
    r = new_array(PyArray_NDIM(a), PyArray_DIMS(a), TYPENUM[prec], 1, 0);
    if (r != NULL && PyArray_CopyInto(r, a) < 0) Py_CLEAR(r);  /* an unsafe cast, as astype's */
    if (r == NULL) PyErr_Clear();
    return (PyObject *)r;
}

/* A Level-3 operand the Python path would convert (tileblas.blas._common.as_matrix, _level3._output): an
 * ndarray of rank 2 of a real, integer or bool dtype other than the routine's (or complex, for a complex
 * routine), byte-swapped or unaligned; or of rank 1, taken as one column.  Converted here as the Python
 * path does (astype(dtype, order='F')), so that such calls stay in C: SciPy converts them as cheaply.  A
 * read-only column of the routine's dtype is a view.  The output (``inout``) is a copy of our own, except
 * a column the call may write in place (``overwrite``, the routine's dtype, contiguous, writeable): then a
 * view, and *inplace is set.  A new reference, or NULL (no exception) to leave the operand as it is. */
static PyObject *
convert_operand(PyObject *o, int prec, int inout, int overwrite, int *inplace)
{
    PyArrayObject *a;
    PyObject *r;
    int nd, plain;
    if (!PyArray_CheckExact(o)) return NULL;
    a = (PyArrayObject *)o;
    nd = PyArray_NDIM(a);
    if ((nd != 1 && nd != 2) || PyArray_DIM(a, 0) < 1 || PyArray_DIM(a, nd - 1) < 1) return NULL;
    if (PyArray_SIZE(a) > CONVERT_MAX) return NULL;
    plain = PyArray_TYPE(a) == TYPENUM[prec] && PyArray_ISALIGNED(a) && PyArray_ISNOTSWAPPED(a);
    if (nd == 2 && plain) return NULL;  /* the common case: the C path takes it as it is */
    if (nd == 1 && plain && (!inout || (overwrite && PyArray_IS_F_CONTIGUOUS(a) && PyArray_ISWRITEABLE(a)))) {
        *inplace = inout;
        r = (PyObject *)a;
        Py_INCREF(r);
    }
    else if (nd == 1 && plain) {  /* one column, copied straight into a vector of our own */
        r = (PyObject *)new_array(1, PyArray_DIMS(a), TYPENUM[prec], 1, 0);
        if (r == NULL) {
            PyErr_Clear();
            return NULL;
        }
        copy_piece(PyArray_BYTES((PyArrayObject *)r), PyArray_DIM(a, 0), PyArray_BYTES(a), PyArray_STRIDE(a, 0), 0,
                   PyArray_DIM(a, 0), 1, prec, 0);
    }
    else if ((r = cast_copy(a, prec)) == NULL)
        return NULL;
    if (nd == 1) {  /* taken as its (m, 1) column: a view of the vector, which stays its base */
        npy_intp dims[2] = {PyArray_DIM(a, 0), 1};
        PyArray_Dims shape = {dims, 2};
        PyObject *col = PyArray_Newshape((PyArrayObject *)r, &shape, NPY_FORTRANORDER);
        Py_DECREF(r);
        if (col == NULL) PyErr_Clear();
        r = col;
    }
    return r;
}

static PyObject *level3_call(Routine *routine, PyObject *const *args);
static Py_ssize_t level3_nparams(int fam);

/* The small-call path given all the routine's arguments in order: the result, or NotImplemented having
 * written nothing, or NULL with an exception.  Where the call as given is not one the C path takes,
 * operands of another dtype or rank 1 are converted (convert_operand) and the call is tried again with
 * them (a call that declines has written nothing).  The result has the rank the output was given
 * with (a vector b of trmm/trsm stays a vector), as in SciPy. */
static PyObject *
level3_small(Routine *routine, PyObject *const *args)
{
    /* where a, b and c sit in each family's arguments (-1: none), and which one BLAS writes */
    static const signed char OPERAND[NFAM][3] = {{1, 2, 4}, {1, 2, 4}, {1, 2, 4}, {1, 3, -1}, {1, 3, -1},
                                                 {1, 2, 4}, {1, 2, 4}, {1, 2, -1}, {1, 2, -1}};
    static const signed char INOUT[NFAM] = {4, 4, 4, 3, 3, 4, 4, 2, 2};
    Level3Object *self = (Level3Object *)routine;
    int fam = self->fam, any = 0, last = (int)level3_nparams(fam) - 1, inplace = 0, io = -1, ow;
    PyObject *conv[3] = {NULL, NULL, NULL}, *given[8], *r;
    r = level3_call(routine, args);  /* the common call: nothing to convert, nothing more to pay */
    if (r != Py_NotImplemented || level3_closed(self)) return r;
    if ((ow = get_overwrite(args[last])) < 0) return r;  /* not an integer: the Python path names it */
    for (int i = 0; i < 3; i++) {
        int at = OPERAND[fam][i];
        if (at < 0) continue;
        if (!PyArray_CheckExact(args[at])) continue;
        conv[i] = convert_operand(args[at], self->prec, at == INOUT[fam], ow > 0, &inplace);
        any |= conv[i] != NULL;
        if (conv[i] != NULL && at == INOUT[fam]) io = i;
    }
    if (!any) return r;  /* NotImplemented: the Python path */
    Py_DECREF(r);
    memcpy(given, args, (size_t)(last + 1) * sizeof *given);
    for (int i = 0; i < 3; i++)
        if (conv[i] != NULL) given[OPERAND[fam][i]] = conv[i];
    if (io >= 0) given[last] = Py_True;  /* the output is a copy of our own or may be written: in place */
    r = level3_call(routine, given);
    if (io >= 0 && r != NULL && r != Py_NotImplemented && PyArray_NDIM((PyArrayObject *)args[INOUT[fam]]) == 1) {
        PyObject *vec;
        if (inplace) {  /* the caller's vector itself, as the Python path returns it */
            vec = args[INOUT[fam]];
            Py_INCREF(vec);
        }
        else if (r == conv[io] && PyArray_BASE((PyArrayObject *)r) != NULL
                 && PyArray_Check(PyArray_BASE((PyArrayObject *)r))
                 && PyArray_NDIM((PyArrayObject *)PyArray_BASE((PyArrayObject *)r)) == 1) {
            /* the column of a vector of our own (convert_operand), written in place: that vector, which
             * owns its data as SciPy's result does */
            vec = PyArray_BASE((PyArrayObject *)r);
            Py_INCREF(vec);
        }
        else {
            npy_intp dims[1] = {PyArray_DIM((PyArrayObject *)r, 0)};
            PyArray_Dims shape = {dims, 1};
            vec = PyArray_Newshape((PyArrayObject *)r, &shape, NPY_FORTRANORDER);
        }
        Py_DECREF(r);
        r = vec;
    }
    for (int i = 0; i < 3; i++) Py_XDECREF(conv[i]);
    return r;
}

/* level3_small once the operands are as BLAS takes them (or left to the Python path). */
static PyObject *
level3_call(Routine *routine, PyObject *const *args)
{
    Level3Object *self = (Level3Object *)routine;
    int fam = self->fam, prec = self->prec, cplx = prec >= 2;
    void *fn = entry[fam][prec];
    PyArrayObject *a = NULL, *b = NULL, *out = NULL, *acopy = NULL, *bcopy = NULL, *unalias[2] = {NULL, NULL};
    scalar_t alpha, beta;
    double flops;

    if (level3_closed(self)) NOT_HANDLED;

    switch (fam) {
    case GEMM: {
        /* gemm(alpha, a, b, beta, c, trans_a, trans_b, overwrite_c) */
        int ta = get_flag(args[5], 2), tb = get_flag(args[6], 2), ow = get_overwrite(args[7]);
        char la, lb, tra, trb;
        int m, n, k, kb, lda, ldb, ldc;
        if (ta < 0 || tb < 0 || ow < 0) NOT_HANDLED;
        if (!cplx) { if (ta == 2) ta = 1; if (tb == 2) tb = 1; }
        if (!get_scalar(args[0], prec, 0, &alpha)) NOT_HANDLED;
        if (!get_beta(args[3], prec, 0, &beta)) NOT_HANDLED;
        if ((a = plain_matrix(args[1], prec)) == NULL || (b = plain_matrix(args[2], prec)) == NULL) NOT_HANDLED;
        m = (int)PyArray_DIM(a, ta ? 1 : 0);
        k = (int)PyArray_DIM(a, ta ? 0 : 1);
        kb = (int)PyArray_DIM(b, tb ? 1 : 0);
        n = (int)PyArray_DIM(b, tb ? 0 : 1);
        if (kb != k) NOT_HANDLED;
        flops = 2.0 * m * n * k * (cplx ? 4.0 : 1.0);
        if (!(flops < limits[fam])) NOT_HANDLED;
        la = layout(a);
        lb = layout(b);
        /* a C-ordered operand is the Fortran-ordered transpose: op(a) = a -> 'T' on it, a.T -> 'N' */
        if (la == 'C' && ta != 2) { tra = ta ? 'N' : 'T'; lda = (int)PyArray_DIM(a, 1); }
        else {
            if (la != 'F') { if ((a = acopy = fortran_copy_as(a, prec, 0)) == NULL) FAIL; }
            tra = "NTC"[ta];
            lda = ld(a);
        }
        if (lb == 'C' && tb != 2) { trb = tb ? 'N' : 'T'; ldb = (int)PyArray_DIM(b, 1); }
        else {
            if (lb != 'F') { if ((b = bcopy = fortran_copy_as(b, prec, 0)) == NULL) FAIL; }
            trb = "NTC"[tb];
            ldb = ld(b);
        }
        if (lda < 1) lda = 1;
        if (ldb < 1) ldb = 1;
        {
            PyArrayObject *ins[2] = {a, b};
            out = output(args[4], prec, ow, m, n, !is_zero(&beta, prec), ins, 2, unalias);
            a = ins[0];
            b = ins[1];
        }
        if (out == NULL) { if (PyErr_Occurred()) FAIL; NOT_HANDLED; }
        ldc = ld(out);
        if (acopy == NULL && bcopy == NULL) {
            /* independent column parts of C (and of op(b): columns of b for 'N', rows for 'T', 'C'), each at
             * least an eighth of m */
            size_t es = (size_t)PyArray_ITEMSIZE(out);
            SplitJob whole = {.gemm = 1, .prec = prec, .f1 = tra, .f2 = trb, .m = m, .n = n, .k = k, .lda = lda,
                              .ldb = ldb, .ldc = ldc, .alpha = alpha, .beta = beta, .a = (char *)PyArray_DATA(a),
                              .b = (char *)PyArray_DATA(b), .c = (char *)PyArray_DATA(out)};
            if (run_split(fam, prec, flops, &whole, n, least_part(m), 0,
                          (trb == 'N' ? (size_t)ldb : 1) * es, (size_t)ldc * es))
                break;
        }
        fn = pick_entry(fam, prec, flops);
        RUN3(((gemm_t)fn)(&tra, &trb, &m, &n, &k, &alpha, PyArray_DATA(a), &lda, PyArray_DATA(b), &ldb, &beta,
                          PyArray_DATA(out), &ldc, 1, 1));
        break;
    }
    case SYMM:
    case HEMM: {
        /* symm(alpha, a, b, beta, c, side, lower, overwrite_c); a square, b m x n */
        int sd = get_flag(args[5], 1), lo = get_flag(args[6], 1), ow = get_overwrite(args[7]);
        int conj = 0, split = 0;
        char side, uplo;
        int m, n, s, lda, ldb, ldc;
        SplitJob whole;
        if (sd < 0 || lo < 0 || ow < 0) NOT_HANDLED;
        if (!get_scalar(args[0], prec, 0, &alpha)) NOT_HANDLED;
        if (!get_beta(args[3], prec, 0, &beta)) NOT_HANDLED;
        if ((a = plain_matrix(args[1], prec)) == NULL || (b = plain_matrix(args[2], prec)) == NULL) NOT_HANDLED;
        s = (int)PyArray_DIM(a, 0);
        if (PyArray_DIM(a, 1) != s) NOT_HANDLED;
        m = (int)PyArray_DIM(b, 0);
        n = (int)PyArray_DIM(b, 1);
        if ((sd == 0 ? m : n) != s) NOT_HANDLED;
        flops = 2.0 * m * n * s * (cplx ? 4.0 : 1.0);
        if (!(flops < limits[fam])) NOT_HANDLED;
        uplo = lo ? 'L' : 'U';
        side = sd ? 'R' : 'L';
        /* A C-ordered a is a's transpose in Fortran order, in the other triangle: a itself for symm, conj(a)
         * for hemm, which is used through conj(alpha conj(a) conj(b) + conj(beta) conj(c)): b copied
         * conjugated, c conjugated after the call (and before, where beta is not zero), no copy of a */
        if (layout(a) == 'C') {
            uplo = lo ? 'U' : 'L';
            lda = s;
            conj = fam == HEMM;
        }
        else {
            if (layout(a) != 'F') { if ((a = acopy = fortran_copy_as(a, prec, 0)) == NULL) FAIL; }
            lda = ld(a);
        }
        if (conj) {
            conj_scalar(&alpha, prec);
            conj_scalar(&beta, prec);
        }
        {
            PyArrayObject *ins[2] = {a, b};
            out = output(args[4], prec, ow, m, n, !is_zero(&beta, prec), ins, 2, unalias);
            a = ins[0];
            b = ins[1];
        }
        if (out == NULL) { if (PyErr_Occurred()) FAIL; NOT_HANDLED; }
        ldc = ld(out);
        memset(&whole, 0, sizeof whole);
        whole.prec = prec;
        whole.f1 = side;
        whole.f2 = uplo;
        whole.m = m;
        whole.n = n;
        whole.lda = lda;
        whole.ldb = m;
        whole.ldc = ldc;
        whole.alpha = alpha;
        whole.beta = beta;
        whole.a = PyArray_BYTES(a);
        whole.c = PyArray_BYTES(out);
        whole.cconj = conj;
        whole.cpre = conj && args[4] != Py_None && !is_zero(&beta, prec);
        if (layout(b) == 'F' && !conj) {
            whole.b = PyArray_BYTES(b);
            whole.ldb = ld(b);
        }
        else {
            /* b copied to Fortran order (conjugated for hemm's conj) by each part, its own piece */
            if ((bcopy = fortran_empty(b)) == NULL) FAIL;
            whole.b = PyArray_BYTES(bcopy);
            whole.bsrc = PyArray_BYTES(b);
            whole.bsr = PyArray_STRIDE(b, 0);
            whole.bsc = PyArray_STRIDE(b, 1);
            whole.bconj = conj;
        }
        ldb = whole.ldb;
        /* an a copied here (neither C- nor Fortran-ordered): not split */
        if (acopy == NULL) {
            /* independent parts of C: columns for side L, rows for side R; each part at least an eighth
             * of the order (every part packs all of A: thinner parts spend more on that than they gain) */
            size_t es = (size_t)PyArray_ITEMSIZE(out);
            split = run_split(fam, prec, flops, &whole, sd ? m : n, least_part(s), sd,
                              sd ? es : (size_t)ldb * es, sd ? es : (size_t)ldc * es);
        }
        if (!split) {
            fn = pick_entry(fam, prec, flops);
            whole.fn = fn;
            RUN3(split_job(0, &whole, 0));
        }
        break;
    }
    case SYRK:
    case HERK:
    case SYR2K:
    case HER2K: {
        /* syrk(alpha, a, beta, c, trans, lower, overwrite_c); syr2k(alpha, a, b, beta, c, trans, lower, ow) */
        int two = (fam == SYR2K || fam == HER2K), herm = (fam == HERK || fam == HER2K);
        int o = two ? 1 : 0;
        int tr = get_flag(args[4 + o], 2), lo = get_flag(args[5 + o], 1), ow = get_overwrite(args[6 + o]);
        char trans, uplo;
        int n, k, lda, ldb = 1, ldc, conj = 0, transposed, cbeta, fresh, rparts;
        if (tr < 0 || lo < 0 || ow < 0) NOT_HANDLED;
        if (cplx && (herm ? tr == 1 : tr == 2)) NOT_HANDLED;  /* BLAS rejects these: Python raises */
        if (!get_scalar(args[0], prec, fam == HERK, &alpha)) NOT_HANDLED;
        if (!get_beta(args[2 + o], prec, herm, &beta)) NOT_HANDLED;
        if ((a = plain_matrix(args[1], prec)) == NULL) NOT_HANDLED;
        if (two) {
            if ((b = plain_matrix(args[2], prec)) == NULL) NOT_HANDLED;
            if (PyArray_DIM(b, 0) != PyArray_DIM(a, 0) || PyArray_DIM(b, 1) != PyArray_DIM(a, 1)) NOT_HANDLED;
        }
        n = (int)PyArray_DIM(a, tr ? 1 : 0);
        k = (int)PyArray_DIM(a, tr ? 0 : 1);
        flops = (two ? 2.0 : 1.0) * n * (n + 1.0) * k * (cplx ? 4.0 : 1.0);
        if (!(flops < limits[fam])) NOT_HANDLED;
        trans = tr == 0 ? 'N' : ((tr == 2 && cplx) ? 'C' : 'T');
        uplo = lo ? 'L' : 'U';
        /* C-ordered operands (both of them): the transposed problem, trans flipped; for herk/her2k that
         * problem is the conjugate of the call's (a C-ordered a is a^T in Fortran order: a^T conj(a) is
         * conj(a a^H)), so c is conjugated before (where beta is not zero) and after, and her2k's alpha.
         * Where k is small against n those passes over the n x n triangle cost more than copies of the
         * n x k operands to Fortran order: herk/her2k copy them instead from n >= 6 k in single precision,
         * 12 k in double (where the strips conjugate their pieces at once), twice that with beta not zero.
         * Measured, the two ways in one process against SciPy (interleaved, best of 7): cherk 384-1536
         * with k = 64 0.75-1.33x conjugating, 0.86-1.40x copying, cherk 1024 with k = 128 0.98x / 1.08x,
         * n = 256 with k = 64 equal; zherk 768-1536 with k = 64 0.92-1.35x / 1.0-1.58x, but 256-512 with
         * k = 64 and 1024 with k = 256 1.16-1.48x / 1.10-1.40x; cher2k/zher2k 1536-2048 with k = 64
         * 0.91-1.01x / 1.03-1.27x. */
        cbeta = args[3 + o] != Py_None && !is_zero(&beta, prec); /* c given and read: conjugated before too */
        transposed = layout(a) == 'C' && (!two || layout(b) == 'C');
        if (transposed && herm && (prec == 2 ? 6.0 : 12.0) * k <= (double)n * (cbeta ? 2 : 1)) transposed = 0;
        if (transposed) {
            trans = trans == 'N' ? (herm ? 'C' : 'T') : 'N';
            lda = (int)PyArray_DIM(a, 1);
            if (two) ldb = (int)PyArray_DIM(b, 1);
            conj = herm;
            if (conj && two) conj_scalar(&alpha, prec);
        }
        else {
            if (layout(a) != 'F') { if ((a = acopy = fortran_copy_as(a, prec, 0)) == NULL) FAIL; }
            lda = ld(a);
            if (two) {
                if (layout(b) != 'F') { if ((b = bcopy = fortran_copy_as(b, prec, 0)) == NULL) FAIL; }
                ldb = ld(b);
            }
        }
        /* a new c that BLAS writes whole in its triangle (beta zero): only the other triangle is zeroed */
        fresh = args[3 + o] == Py_None && is_zero(&beta, prec) && k > 0;
        {
            PyArrayObject *ins[2] = {a, b};
            out = output(args[3 + o], prec, ow, n, n, !fresh, ins, two ? 2 : 1, unalias);
            a = ins[0];
            b = ins[1];
        }
        if (out == NULL) { if (PyErr_Occurred()) FAIL; NOT_HANDLED; }
        ldc = ld(out);
        if (fresh && trans == 'N' && !cplx && (rparts = rank_gemm_parts(fam, prec, flops, n, k)) >= 0) {
            rank_by_gemm(prec, two, lo, n, k, &alpha, PyArray_BYTES(a), lda, two ? PyArray_BYTES(b) : NULL, ldb,
                         PyArray_BYTES(out), ldc, rparts);
            break;
        }
        if (fresh) zero_other_triangle(PyArray_BYTES(out), ldc, n, lo, elsize(prec));
        if (k > 0) {
            RankJob whole;
            memset(&whole, 0, sizeof whole);
            whole.two = two;
            whole.herm = herm;
            whole.prec = prec;
            whole.uplo = uplo;
            whole.trans = trans;
            whole.n = n;
            whole.k = k;
            whole.lda = lda;
            whole.ldb = ldb;
            whole.ldc = ldc;
            whole.alpha = alpha;
            whole.beta = beta;
            whole.a = PyArray_BYTES(a);
            whole.b = two ? PyArray_BYTES(b) : NULL;
            whole.c = PyArray_BYTES(out);
            whole.cconj = conj;
            whole.cpre = conj && cbeta;
            if (run_rank_split(fam, prec, flops, &whole)) break;
        }
        fn = pick_entry(fam, prec, flops);
        if (conj && cbeta) conj_triangle(PyArray_BYTES(out), ldc, n, lo, prec);
        if (two)
            RUN3(((syr2k_t)fn)(&uplo, &trans, &n, &k, &alpha, PyArray_DATA(a), &lda, PyArray_DATA(b), &ldb, &beta,
                               PyArray_DATA(out), &ldc, 1, 1));
        else
            RUN3(((syrk_t)fn)(&uplo, &trans, &n, &k, &alpha, PyArray_DATA(a), &lda, &beta, PyArray_DATA(out), &ldc,
                              1, 1));
        if (conj) conj_triangle(PyArray_BYTES(out), ldc, n, lo, prec);
        break;
    }
    case TRMM:
    case TRSM: {
        /* trmm(alpha, a, b, side, lower, trans_a, diag, overwrite_b); a square of order m (side 0) or n */
        int sd = get_flag(args[3], 1), lo = get_flag(args[4], 1), ta = get_flag(args[5], 2);
        int dg = get_flag(args[6], 1), ow = get_overwrite(args[7]);
        char uplo, transa;
        int m, n, s, lda, ldb, fill = 0;
        PyArrayObject *bin;
        if (sd < 0 || lo < 0 || ta < 0 || dg < 0 || ow < 0) NOT_HANDLED;
        if (!cplx && ta == 2) ta = 1;
        if (!get_scalar(args[0], prec, 0, &alpha)) NOT_HANDLED;
        if ((a = plain_matrix(args[1], prec)) == NULL || (bin = plain_matrix(args[2], prec)) == NULL) NOT_HANDLED;
        m = (int)PyArray_DIM(bin, 0);
        n = (int)PyArray_DIM(bin, 1);
        s = sd ? n : m;
        if (PyArray_DIM(a, 0) != s || PyArray_DIM(a, 1) != s) NOT_HANDLED;
        flops = 1.0 * m * n * s * (cplx ? 4.0 : 1.0);
        if (!(flops < tri_limits[fam - TRMM][prec][sd ? 1 : 0])) NOT_HANDLED;
        {
            const double *w = tri_window[fam - TRMM][prec][sd ? 1 : 0];
            double rhs = sd ? m : n;
            if (w[0] > 0 && s >= w[0] && rhs >= w[1] && rhs <= w[2]) NOT_HANDLED;  /* the recursion's */
        }
        uplo = lo ? 'L' : 'U';
        transa = "NTC"[ta];
        if (layout(a) == 'C' && ta != 2) {  /* the Fortran-ordered transpose: other triangle, trans flipped */
            uplo = lo ? 'U' : 'L';
            transa = ta ? 'N' : 'T';
            lda = s;
        }
        else {
            if (layout(a) != 'F') { if ((a = acopy = fortran_copy_as(a, prec, 0)) == NULL) FAIL; }
            lda = ld(a);
        }
        /* independent parts of b (columns for side L, rows for side R) where set_split asks for it, each
         * solved or multiplied on the one-thread instance, at once on the pool; else one call.  A b not
         * written in place is copied by the part that works on it, its own piece, on its thread (copied
         * by this thread first, the other thread's half crossed cores after the copy). */
        if (writes_in_place(bin, ow)) {
            PyArrayObject *ins[1] = {a};
            out = output(args[2], prec, ow, m, n, 0, ins, 1, unalias);
            a = ins[0];
        }
        else {
            out = fortran_empty(bin);
            fill = 1;
        }
        if (out == NULL) { if (PyErr_Occurred()) FAIL; NOT_HANDLED; }
        ldb = ld(out);
        {
            size_t es = (size_t)PyArray_ITEMSIZE(out);
            SplitJob whole = {.tri = 1, .prec = prec, .f1 = sd ? 'R' : 'L', .f2 = uplo, .f3 = transa,
                              .f4 = dg ? 'U' : 'N', .m = m, .n = n, .lda = lda, .ldb = ldb, .ldc = ldb, .alpha = alpha,
                              .a = PyArray_BYTES(a), .b = PyArray_BYTES(out), .c = PyArray_BYTES(out)};
            if (fill) {
                whole.bsrc = PyArray_BYTES(bin);
                whole.bsr = PyArray_STRIDE(bin, 0);
                whole.bsc = PyArray_STRIDE(bin, 1);
            }
            /* an a copied here (neither C- nor Fortran-ordered, or conjugated): not split */
            if (acopy != NULL || !run_split(fam, prec, flops, &whole, sd ? m : n, least_part(s), sd,
                                            sd ? es : (size_t)ldb * es, sd ? es : (size_t)ldb * es)) {
                whole.fn = pick_entry(fam, prec, flops);
                RUN3(split_job(0, &whole, 0));
            }
        }
        break;
    }
    default:
        NOT_HANDLED;
    }
    Py_XDECREF(acopy);
    Py_XDECREF(bcopy);
    Py_XDECREF(unalias[0]);
    Py_XDECREF(unalias[1]);
    return (PyObject *)out;

python:
    Py_XDECREF(acopy);
    Py_XDECREF(bcopy);
    Py_XDECREF(unalias[0]);
    Py_XDECREF(unalias[1]);
    Py_XDECREF(out);
    Py_RETURN_NOTIMPLEMENTED;

error:
    Py_XDECREF(acopy);
    Py_XDECREF(bcopy);
    Py_XDECREF(unalias[0]);
    Py_XDECREF(unalias[1]);
    Py_XDECREF(out);
    return NULL;
}

static Py_ssize_t
level3_nparams(int fam)
{
    return (fam == SYRK || fam == HERK) ? 7 : 8;
}


/* ------------------------------------------------------------------------------------ the type */

static PyObject *
level3_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    const char *fam, *prefix;
    Level3Object *self;
    int f = -1, p = -1;
    static char *kwlist[] = {"family", "prefix", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ss", kwlist, &fam, &prefix))
        return NULL;
    for (int i = 0; i < NFAM; i++)
        if (strcmp(fam, FAMILY[i]) == 0) f = i;
    if (prefix[0] != '\0' && prefix[1] == '\0') p = prefix_index(prefix[0]);
    if (f < 0 || p < 0) {
        PyErr_Format(PyExc_ValueError, "unknown Level-3 routine %s%s", prefix, fam);
        return NULL;
    }
    if ((f == HEMM || f == HERK || f == HER2K) && p < 2) {
        PyErr_Format(PyExc_ValueError, "%s%s does not exist (Hermitian routines are complex)", prefix, fam);
        return NULL;
    }
    self = (Level3Object *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->fam = f;
    self->prec = p;
    if (routine_init(&self->r, level3_small, level3_nparams(f), NULL, NULL, NULL, "Level3") < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* "<tileblas.blas routine dgemm>" (the name update_wrapper copied from the fallback) */
static PyObject *
front_repr(PyObject *self)
{
    PyObject *name = PyObject_GetAttrString(self, "__name__"), *r;
    if (name == NULL) return NULL;
    r = PyUnicode_FromFormat("<tileblas.blas routine %S>", name);
    Py_DECREF(name);
    return r;
}

/* pickle: a routine with a front is saved as its module's attribute __qualname__ (as functions are) */
static PyObject *
front_reduce(PyObject *self, PyObject *unused)
{
    return PyObject_GetAttrString(self, "__qualname__");
}

/* routine.front(fallback, names, defaults): the same path (a copy of this object's own fields) with a
 * front, as tileblas.blas hands the routine out (a new object). */
static PyObject *
routine_front(Routine *self, PyObject *const *args, Py_ssize_t nargs)
{
    Routine *r;
    char what[80];
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "front(fallback, names, defaults) takes 3 arguments");
        return NULL;
    }
    if (args[0] == Py_None) {
        PyErr_SetString(PyExc_TypeError, "front: fallback must be callable, got None");
        return NULL;
    }
    r = (Routine *)Py_TYPE(self)->tp_alloc(Py_TYPE(self), 0);
    if (r == NULL) return NULL;
    /* the type's own fields after the common part: plain data (flags, indices, an entry point) */
    memcpy((char *)r + sizeof(Routine), (char *)self + sizeof(Routine), Py_TYPE(self)->tp_basicsize - sizeof(Routine));
    PyOS_snprintf(what, sizeof what, "%s.front", Py_TYPE(self)->tp_name);
    if (routine_init(r, self->small, self->nparams, args[0], args[1], args[2], what) < 0) {
        Py_DECREF(r);
        return NULL;
    }
    return (PyObject *)r;
}

static PyMethodDef front_methods[] = {
    {"front", (PyCFunction)(void (*)(void))routine_front, METH_FASTCALL,
     "front(fallback, names, defaults): this path in front of the Python implementation fallback (its\n"
     "parameter names and defaults), as tileblas.blas hands the routine out (a new object)."},
    {"__reduce__", front_reduce, METH_NOARGS, "Pickled by reference: the module attribute __qualname__."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef front_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *
level3_repr(Level3Object *self)
{
    if (self->r.front.fallback != NULL) return front_repr((PyObject *)self);
    return PyUnicode_FromFormat("<tileblas small-call path of %c%s>", PREFIXES[self->prec], FAMILY[self->fam]);
}

static PyTypeObject Level3Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tileblas.blas._fastpath.Level3",
    .tp_basicsize = sizeof(Level3Object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Level3(family, prefix): the small-call path of one Level-3 routine; called with all the\n"
              "routine's arguments positionally, it returns the result or NotImplemented (Python path).\n"
              "path.front(fallback, names, defaults) is the routine itself: called as users call it, it runs\n"
              "the small-call path or hands the call, as made, to fallback (the Python implementation).",
    .tp_new = level3_new,
    .tp_dealloc = (destructor)routine_dealloc,
    .tp_traverse = (traverseproc)routine_traverse,
    .tp_clear = (inquiry)routine_clear,
    .tp_dictoffset = offsetof(Routine, front) + offsetof(Front, dict),
    .tp_methods = front_methods,
    .tp_getset = front_getset,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Routine, vectorcall),
    .tp_repr = (reprfunc)level3_repr,
};

/* ====================================================================================== Level 1/2 */
/*
 * Level12(kind, prefix, address): the small-call path of one Level-1/2 routine of tileblas.blas, called
 * with all the routine's arguments positionally.  It handles the calls the Python fast paths of
 * tileblas.blas._level1 / _level2 handle (default n, offsets 0, increments 1, operands of the routine's dtype
 * that BLAS can take as they are), with the same results, and returns NotImplemented for everything else.
 * The BLAS instance is the one the Python code uses (``address`` is its entry point).  small.front(fallback,
 * names, defaults) is the public routine: the same path with a front, as Level3's.
 */

enum { AXPY, SCAL, COPY, SWAP, DOT, DOTU, DOTC, NRM2, ASUM, IAMAX, GEMV, SYMV, HEMV, TRMV, TRSV, GER, GERU,
       GERC, SYR, HER, SYR2, HER2, ROT, ROTM, RSCAL, ROTG, ROTMG, GBMV, SBMV, HBMV, SPMV, HPMV, TBMV, TBSV,
       TPMV, TPSV, SPR, HPR, SPR2, HPR2, NKIND };
static const char *KIND[NKIND] = {"axpy", "scal", "copy", "swap", "dot", "dotu", "dotc", "nrm2", "asum",
                                  "iamax", "gemv", "symv", "hemv", "trmv", "trsv", "ger", "geru", "gerc",
                                  "syr", "her", "syr2", "her2", "rot", "rotm", "rscal", "rotg", "rotmg", "gbmv",
                                  "sbmv", "hbmv", "spmv", "hpmv", "tbmv", "tbsv", "tpmv", "tpsv", "spr", "hpr",
                                  "spr2", "hpr2"};
static const Py_ssize_t NARGS[NKIND] = {8, 5, 7, 7, 7, 7, 7, 4, 4, 4, 11, 11, 11, 8, 8, 9, 9, 9, 8, 8, 11, 11,
                                        11, 10, 6, 2, 4, 15, 12, 12, 12, 12, 9, 9, 9, 9, 8, 8, 11, 11};

/* Above this many elements a Level-1/2 call runs without the GIL. */
#define GIL_ELEMENTS 4096

typedef struct {
    Routine r;
    int kind;
    int prec;
    void *fn;
} Level12Object;

/* An integer (int_value) equal to ``v``. */
static inline int
is_int(PyObject *o, long v)
{
    long got;
    return int_value(o, &got) && got == v;
}

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

#define RUN(n, stmt) RUN_IF((n) > GIL_ELEMENTS, stmt)

/* A Level-1/2 array argument the Python path would copy (tileblas.blas._common.as_vector, as_inout): an
 * ndarray of a real, integer or bool dtype other than the routine's (or complex, for a complex routine),
 * byte-swapped, unaligned, or neither Fortran- nor C-contiguous.  Copied here as the Python path does (to
 * the routine's dtype, Fortran order), so that such calls stay in C; the copy is what the call writes and
 * returns where the argument is an output, as the Python path's copy is.  A new reference, or NULL (no
 * exception) to leave the argument as it is. */
static PyObject *
convert_array(PyObject *o, int prec)
{
    PyArrayObject *a;
    if (!PyArray_CheckExact(o)) return NULL;
    a = (PyArrayObject *)o;
    if (PyArray_NDIM(a) < 1 || PyArray_SIZE(a) < 1 || PyArray_SIZE(a) > CONVERT_MAX) return NULL;
    if (PyArray_TYPE(a) == TYPENUM[prec] && PyArray_ISALIGNED(a) && PyArray_ISNOTSWAPPED(a)
        && (PyArray_IS_F_CONTIGUOUS(a) || PyArray_IS_C_CONTIGUOUS(a)))
        return NULL;  /* the common case: the C path takes it as it is */
    return cast_copy(a, prec);
}

static PyObject *level12_call(Routine *routine, PyObject *const *args);

/* The small-call path given all the routine's arguments in order (as level3_small): where the call as given
 * is not one the C path takes, array arguments of another dtype, byte order or alignment, or strided, are
 * copied (convert_array) and the call is tried again with them. */
static PyObject *
level12_small(Routine *routine, PyObject *const *args)
{
    Level12Object *self = (Level12Object *)routine;
    Py_ssize_t nargs = NARGS[self->kind];
    PyObject *given[16], *r;
    int any = 0;
    r = level12_call(routine, args);  /* the common call: nothing to convert, nothing more to pay */
    if (r != Py_NotImplemented || self->fn == NULL || (declining && declined)) return r;  /* or closed */
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
    r = level12_call(routine, given);
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (given[i] != args[i]) Py_DECREF(given[i]);
    return r;
}

/* level12_small once the arrays are as BLAS takes them (or left to the Python path). */
static PyObject *
level12_call(Routine *routine, PyObject *const *args)
{
    Level12Object *self = (Level12Object *)routine;
    int kind = self->kind, prec = self->prec, one = 1, k;
    void *fn = self->fn;
    PyArrayObject *x, *y;
    scalar_t s;

    if (fn == NULL || (declining && declined)) Py_RETURN_NOTIMPLEMENTED;
    switch (kind) {
    case AXPY:  /* axpy(x, y, n, a, offx, incx, offy, incy) */
    case COPY:  /* copy(x, y, n, offx, incx, offy, incy) */
    case SWAP:
    case DOT:
    case DOTU:
    case DOTC: {
        int o = kind == AXPY ? 1 : 0;
        if (args[2] != Py_None || !is_int(args[3 + o], 0) || !is_int(args[4 + o], 1) || !is_int(args[5 + o], 0)
            || !is_int(args[6 + o], 1))
            Py_RETURN_NOTIMPLEMENTED;
        if ((x = plain_vector(args[0], prec, kind == SWAP)) == NULL) Py_RETURN_NOTIMPLEMENTED;
        if ((y = plain_vector(args[1], prec, kind == AXPY || kind == COPY || kind == SWAP)) == NULL)
            Py_RETURN_NOTIMPLEMENTED;
        k = (int)PyArray_SIZE(x);
        if (k < 1 || PyArray_SIZE(y) < k) Py_RETURN_NOTIMPLEMENTED;
        if (kind == AXPY) {
            if (!get_scalar(args[3], prec, 0, &s)) Py_RETURN_NOTIMPLEMENTED;
            RUN(k, ((axpy_t)fn)(&k, &s, PyArray_DATA(x), &one, PyArray_DATA(y), &one));
            Py_INCREF(y);
            return (PyObject *)y;
        }
        if (kind == COPY) {
            RUN(k, ((copy_t)fn)(&k, PyArray_DATA(x), &one, PyArray_DATA(y), &one));
            Py_INCREF(y);
            return (PyObject *)y;
        }
        if (kind == SWAP) {
            RUN(k, ((copy_t)fn)(&k, PyArray_DATA(x), &one, PyArray_DATA(y), &one));
            return PyTuple_Pack(2, (PyObject *)x, (PyObject *)y);
        }
        if (kind == DOT) {
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
        }
        /* dotu / dotc through CBLAS's *_sub form (no complex return value across the ABI) */
        RUN(k, ((cdot_sub_t)fn)(k, PyArray_DATA(x), 1, PyArray_DATA(y), 1, &s));
        if (prec == 2) return PyComplex_FromDoubles((double)s.cf[0], (double)s.cf[1]);
        return PyComplex_FromDoubles(s.cd[0], s.cd[1]);
    }
    case SCAL: {  /* scal(a, x, n, offx, incx) */
        if (args[2] != Py_None || !is_int(args[3], 0) || !is_int(args[4], 1)) Py_RETURN_NOTIMPLEMENTED;
        if ((x = plain_vector(args[1], prec, 1)) == NULL) Py_RETURN_NOTIMPLEMENTED;
        k = (int)PyArray_SIZE(x);
        if (k < 1 || !get_scalar(args[0], prec, 0, &s)) Py_RETURN_NOTIMPLEMENTED;
        RUN(k, ((scal_t)fn)(&k, &s, PyArray_DATA(x), &one));
        Py_INCREF(x);
        return (PyObject *)x;
    }
    case NRM2:
    case ASUM:
    case IAMAX: {  /* nrm2(x, n, offx, incx); the vector's precision */
        if (args[1] != Py_None || !is_int(args[2], 0) || !is_int(args[3], 1)) Py_RETURN_NOTIMPLEMENTED;
        if ((x = plain_vector(args[0], prec, 0)) == NULL) Py_RETURN_NOTIMPLEMENTED;
        k = (int)PyArray_SIZE(x);
        if (k < 1) Py_RETURN_NOTIMPLEMENTED;
        if (kind == IAMAX) {
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
    case GEMV: {  /* gemv(alpha, a, x, beta, y, offx, incx, offy, incy, trans, overwrite_y) */
        PyArrayObject *a, *out;
        scalar_t beta;
        int tr, m, n, rows, cols, M, N;
        char t;
        npy_intp dims[1];
        if (args[4] != Py_None || !is_int(args[5], 0) || !is_int(args[6], 1) || !is_int(args[7], 0)
            || !is_int(args[8], 1))
            Py_RETURN_NOTIMPLEMENTED;
        if (is_int(args[9], 0)) tr = 0;
        else if (is_int(args[9], 1)) tr = 1;
        else Py_RETURN_NOTIMPLEMENTED;
        if (!PyArray_CheckExact(args[1])) Py_RETURN_NOTIMPLEMENTED;
        a = (PyArrayObject *)args[1];
        if (PyArray_NDIM(a) != 2 || PyArray_TYPE(a) != TYPENUM[prec] || !PyArray_ISNOTSWAPPED(a)
            || !PyArray_ISALIGNED(a) || PyArray_DIM(a, 0) > INT32_MAX || PyArray_DIM(a, 1) > INT32_MAX)
            Py_RETURN_NOTIMPLEMENTED;
        if ((x = plain_vector(args[2], prec, 0)) == NULL) Py_RETURN_NOTIMPLEMENTED;
        if (!get_scalar(args[0], prec, 0, &s)) Py_RETURN_NOTIMPLEMENTED;
        if (!get_beta(args[3], prec, 0, &beta)) Py_RETURN_NOTIMPLEMENTED;
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
        out = new_array(1, dims, TYPENUM[prec], 0, 1);
        if (out == NULL) return NULL;
        RUN((long)M * N, ((gemv_t)fn)(&t, &M, &N, &s, PyArray_DATA(a), &M, PyArray_DATA(x), &one, &beta,
                                        PyArray_DATA(out), &one, 1));
        return (PyObject *)out;
    }
    case SYMV:
    case HEMV: {  /* symv(alpha, a, x, beta, y, offx, incx, offy, incy, lower, overwrite_y) */
        PyArrayObject *a, *out;
        scalar_t beta;
        int n, lo;
        char uplo;
        npy_intp dims[1];
        if (args[4] != Py_None || !is_int(args[5], 0) || !is_int(args[6], 1) || !is_int(args[7], 0)
            || !is_int(args[8], 1))
            Py_RETURN_NOTIMPLEMENTED;
        if ((lo = get_flag(args[9], 1)) < 0) Py_RETURN_NOTIMPLEMENTED;
        if ((a = square_matrix(args[1], prec)) == NULL || (x = plain_vector(args[2], prec, 0)) == NULL)
            Py_RETURN_NOTIMPLEMENTED;
        if (!get_scalar(args[0], prec, 0, &s)) Py_RETURN_NOTIMPLEMENTED;
        if (!get_beta(args[3], prec, 0, &beta)) Py_RETURN_NOTIMPLEMENTED;
        n = (int)PyArray_DIM(a, 0);
        if (PyArray_SIZE(x) < n) Py_RETURN_NOTIMPLEMENTED;
        uplo = lo ? 'L' : 'U';
        if (!PyArray_IS_F_CONTIGUOUS(a)) {
            /* a C-ordered symmetric a is its own transpose: the other triangle (not for Hermitian) */
            if (kind == HEMV || !PyArray_IS_C_CONTIGUOUS(a)) Py_RETURN_NOTIMPLEMENTED;
            uplo = lo ? 'U' : 'L';
        }
        dims[0] = n;
        out = new_array(1, dims, TYPENUM[prec], 0, 1);
        if (out == NULL) return NULL;
        RUN((long)n * n, ((symv_t)fn)(&uplo, &n, &s, PyArray_DATA(a), &n, PyArray_DATA(x), &one, &beta,
                                        PyArray_DATA(out), &one, 1));
        return (PyObject *)out;
    }
    case TRMV:
    case TRSV: {  /* trmv(a, x, offx, incx, lower, trans, diag, overwrite_x); trsv(a, x, incx, offx, ...) */
        PyArrayObject *a, *out;
        int n, lo, tr, dg, ow, real = prec < 2;
        char uplo, t, diag;
        PyObject *off = args[kind == TRMV ? 2 : 3], *inc = args[kind == TRMV ? 3 : 2];
        if (!is_int(off, 0) || !is_int(inc, 1)) Py_RETURN_NOTIMPLEMENTED;
        lo = get_flag(args[4], 1);
        tr = get_flag(args[5], 2);
        dg = get_flag(args[6], 1);
        ow = get_overwrite(args[7]);
        if (lo < 0 || tr < 0 || dg < 0 || ow < 0) Py_RETURN_NOTIMPLEMENTED;
        if ((a = square_matrix(args[0], prec)) == NULL) Py_RETURN_NOTIMPLEMENTED;
        if ((x = plain_vector(args[1], prec, 0)) == NULL) Py_RETURN_NOTIMPLEMENTED;
        n = (int)PyArray_DIM(a, 0);
        if (PyArray_SIZE(x) < n) Py_RETURN_NOTIMPLEMENTED;
        if (PyArray_IS_F_CONTIGUOUS(a)) {
            uplo = lo ? 'L' : 'U';
            t = "NTC"[tr];
        }
        else if (PyArray_IS_C_CONTIGUOUS(a) && (real || tr < 2)) {  /* a.T is Fortran-ordered */
            uplo = lo ? 'U' : 'L';
            t = tr ? 'N' : 'T';
        }
        else Py_RETURN_NOTIMPLEMENTED;
        diag = dg ? 'U' : 'N';
        /* x is intent(in,out,copy): itself with overwrite_x when writeable, else a Fortran-ordered copy */
        if (ow && (PyArray_ISWRITEABLE(x) || PyArray_BASE(x) == NULL)) {
            if (overlaps(x, a)) Py_RETURN_NOTIMPLEMENTED;
            Py_INCREF(x);
            out = x;
        }
        else if ((out = fortran_copy(x)) == NULL) return NULL;
        RUN((long)n * n, ((trmv_t)fn)(&uplo, &t, &diag, &n, PyArray_DATA(a), &n, PyArray_DATA(out), &one, 1, 1,
                                        1));
        return (PyObject *)out;
    }
    case GER:
    case GERU:
    case GERC: {  /* ger(alpha, x, y, incx, incy, a, overwrite_x, overwrite_y, overwrite_a) */
        PyArrayObject *out;
        int m, n;
        if (!is_int(args[3], 1) || !is_int(args[4], 1) || args[5] != Py_None) Py_RETURN_NOTIMPLEMENTED;
        if ((x = plain_vector(args[1], prec, 0)) == NULL || (y = plain_vector(args[2], prec, 0)) == NULL)
            Py_RETURN_NOTIMPLEMENTED;
        if (!get_scalar(args[0], prec, 0, &s)) Py_RETURN_NOTIMPLEMENTED;
        m = (int)PyArray_SIZE(x);
        n = (int)PyArray_SIZE(y);
        if (m < 1 || n < 1) Py_RETURN_NOTIMPLEMENTED;
        if ((out = zero_matrix(prec, m, n)) == NULL) return NULL;
        RUN((long)m * n, ((ger_t)fn)(&m, &n, &s, PyArray_DATA(x), &one, PyArray_DATA(y), &one, PyArray_DATA(out),
                                       &m));
        return (PyObject *)out;
    }
    case SYR:
    case HER: {  /* syr(alpha, x, lower, incx, offx, n, a, overwrite_a); her: real alpha */
        PyArrayObject *out;
        int n, lo;
        char uplo;
        if (!is_int(args[3], 1) || !is_int(args[4], 0) || args[5] != Py_None || args[6] != Py_None)
            Py_RETURN_NOTIMPLEMENTED;
        if ((lo = get_flag(args[2], 1)) < 0) Py_RETURN_NOTIMPLEMENTED;
        if ((x = plain_vector(args[1], prec, 0)) == NULL) Py_RETURN_NOTIMPLEMENTED;
        if (kind == HER && PyComplex_Check(args[0])) Py_RETURN_NOTIMPLEMENTED;
        if (!get_scalar(args[0], prec, kind == HER, &s)) Py_RETURN_NOTIMPLEMENTED;
        n = (int)PyArray_SIZE(x);
        if (n < 1) Py_RETURN_NOTIMPLEMENTED;
        uplo = lo ? 'L' : 'U';
        if ((out = zero_matrix(prec, n, n)) == NULL) return NULL;
        RUN((long)n * n, ((syr_t)fn)(&uplo, &n, &s, PyArray_DATA(x), &one, PyArray_DATA(out), &n, 1));
        return (PyObject *)out;
    }
    case SYR2:
    case HER2: {  /* syr2(alpha, x, y, lower, incx, offx, incy, offy, n, a, overwrite_a) */
        PyArrayObject *out;
        int n, lo;
        char uplo;
        if (!is_int(args[4], 1) || !is_int(args[5], 0) || !is_int(args[6], 1) || !is_int(args[7], 0)
            || args[8] != Py_None || args[9] != Py_None)
            Py_RETURN_NOTIMPLEMENTED;
        if ((lo = get_flag(args[3], 1)) < 0) Py_RETURN_NOTIMPLEMENTED;
        if ((x = plain_vector(args[1], prec, 0)) == NULL || (y = plain_vector(args[2], prec, 0)) == NULL)
            Py_RETURN_NOTIMPLEMENTED;
        if (!get_scalar(args[0], prec, 0, &s)) Py_RETURN_NOTIMPLEMENTED;
        n = (int)(PyArray_SIZE(x) < PyArray_SIZE(y) ? PyArray_SIZE(x) : PyArray_SIZE(y));
        if (n < 1) Py_RETURN_NOTIMPLEMENTED;
        uplo = lo ? 'L' : 'U';
        if ((out = zero_matrix(prec, n, n)) == NULL) return NULL;
        RUN((long)n * n, ((syr2_t)fn)(&uplo, &n, &s, PyArray_DATA(x), &one, PyArray_DATA(y), &one,
                                        PyArray_DATA(out), &n, 1));
        return (PyObject *)out;
    }
    case ROT:
    case ROTM: {  /* rot(x, y, c, s, n, offx, incx, offy, incy, ow_x, ow_y); rotm(x, y, param, n, ..., ow_y) */
        PyArrayObject *xo, *yo, *pa = NULL;
        scalar_t c, sn;
        int o = kind == ROT ? 1 : 0;
        int owx, owy;
        if (args[3 + o] != Py_None || !is_int(args[4 + o], 0) || !is_int(args[5 + o], 1) || !is_int(args[6 + o], 0)
            || !is_int(args[7 + o], 1))
            Py_RETURN_NOTIMPLEMENTED;
        owx = get_overwrite(args[8 + o]);
        owy = get_overwrite(args[9 + o]);
        if (owx < 0 || owy < 0) Py_RETURN_NOTIMPLEMENTED;
        if (kind == ROT) {
            if (!get_real(args[2], prec, &c) || !get_real(args[3], prec, &sn)) Py_RETURN_NOTIMPLEMENTED;
        }
        else if ((pa = plain_vector(args[2], prec, 0)) == NULL || PyArray_SIZE(pa) != 5)
            Py_RETURN_NOTIMPLEMENTED;
        if (plain_vector(args[0], prec, 0) == NULL || (y = plain_vector(args[1], prec, 0)) == NULL)
            Py_RETURN_NOTIMPLEMENTED;
        k = (int)PyArray_SIZE((PyArrayObject *)args[0]);
        if (k < 1 || PyArray_SIZE(y) < k) Py_RETURN_NOTIMPLEMENTED;
        if ((xo = inout_vector(args[0], prec, owx)) == NULL) return PyErr_Occurred() ? NULL : Py_NewRef(Py_NotImplemented);
        if ((yo = inout_vector(args[1], prec, owy)) == NULL) {
            Py_DECREF(xo);
            return PyErr_Occurred() ? NULL : Py_NewRef(Py_NotImplemented);
        }
        if (kind == ROT)
            RUN(k, ((rot_t)fn)(&k, PyArray_DATA(xo), &one, PyArray_DATA(yo), &one, &c, &sn));
        else
            RUN(k, ((rotm_t)fn)(&k, PyArray_DATA(xo), &one, PyArray_DATA(yo), &one, PyArray_DATA(pa)));
        {
            PyObject *r = PyTuple_Pack(2, (PyObject *)xo, (PyObject *)yo);
            Py_DECREF(xo);
            Py_DECREF(yo);
            return r;
        }
    }
    case RSCAL: {  /* rscal(a, x, n, offx, incx, overwrite_x): csscal / zdscal */
        PyArrayObject *xo;
        int ow = get_overwrite(args[5]);
        if (args[2] != Py_None || !is_int(args[3], 0) || !is_int(args[4], 1) || ow < 0) Py_RETURN_NOTIMPLEMENTED;
        if (!get_real(args[0], prec, &s) || (x = plain_vector(args[1], prec, 0)) == NULL) Py_RETURN_NOTIMPLEMENTED;
        k = (int)PyArray_SIZE(x);
        if (k < 1) Py_RETURN_NOTIMPLEMENTED;
        if ((xo = inout_vector(args[1], prec, ow)) == NULL) return PyErr_Occurred() ? NULL : Py_NewRef(Py_NotImplemented);
        RUN(k, ((scal_t)fn)(&k, &s, PyArray_DATA(xo), &one));
        return (PyObject *)xo;
    }
    case ROTG: {  /* rotg(a, b) -> (c, s) */
        scalar_t a, b, c, sn;
        if (!get_scalar(args[0], prec, 0, &a) || !get_scalar(args[1], prec, 0, &b)) Py_RETURN_NOTIMPLEMENTED;
        memset(&c, 0, sizeof c);
        memset(&sn, 0, sizeof sn);
        ((rotg_t)fn)(&a, &b, &c, &sn);
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
    case ROTMG: {  /* rotmg(d1, d2, x1, y1) -> param (5,) */
        scalar_t d1, d2, x1, y1;
        PyArrayObject *param;
        if (!get_real(args[0], prec, &d1) || !get_real(args[1], prec, &d2) || !get_real(args[2], prec, &x1)
            || !get_real(args[3], prec, &y1))
            Py_RETURN_NOTIMPLEMENTED;
        if ((param = zero_vector(prec, 5)) == NULL) return NULL;
        ((rotmg_t)fn)(&d1, &d2, &x1, &y1, PyArray_DATA(param));
        return (PyObject *)param;
    }
    case GBMV: {  /* gbmv(m, n, kl, ku, alpha, a, x, incx, offx, beta, y, incy, offy, trans, overwrite_y) */
        PyArrayObject *a, *out;
        scalar_t beta;
        long m, n, kl, ku;
        int im, in, ikl, iku, lda, tr, rows, cols;
        char t;
        if ((m = get_size(args[0], 1)) < 0 || (n = get_size(args[1], 1)) < 0 || (kl = get_size(args[2], 0)) < 0
            || (ku = get_size(args[3], 0)) < 0)
            Py_RETURN_NOTIMPLEMENTED;
        if (!is_int(args[7], 1) || !is_int(args[8], 0) || args[10] != Py_None || !is_int(args[11], 1)
            || !is_int(args[12], 0) || (tr = get_flag(args[13], 2)) < 0)
            Py_RETURN_NOTIMPLEMENTED;
        if ((a = fortran_matrix(args[5], prec)) == NULL || (x = plain_vector(args[6], prec, 0)) == NULL)
            Py_RETURN_NOTIMPLEMENTED;
        if (m < kl + ku + 1 || PyArray_DIM(a, 1) != n || PyArray_DIM(a, 0) < kl + ku + 1) Py_RETURN_NOTIMPLEMENTED;
        if (!get_scalar(args[4], prec, 0, &s)) Py_RETURN_NOTIMPLEMENTED;
        if (!get_beta(args[9], prec, 0, &beta)) Py_RETURN_NOTIMPLEMENTED;
        rows = (int)(tr ? n : m);
        cols = (int)(tr ? m : n);
        if (PyArray_SIZE(x) < cols) Py_RETURN_NOTIMPLEMENTED;
        if ((out = zero_vector(prec, rows)) == NULL) return NULL;
        im = (int)m; in = (int)n; ikl = (int)kl; iku = (int)ku;
        lda = (int)PyArray_DIM(a, 0);
        t = "NTC"[tr];
        RUN((long)rows * (kl + ku + 1), ((gbmv_t)fn)(&t, &im, &in, &ikl, &iku, &s, PyArray_DATA(a), &lda,
                                                        PyArray_DATA(x), &one, &beta, PyArray_DATA(out), &one, 1));
        return (PyObject *)out;
    }
    case SBMV:
    case HBMV:
    case SPMV:
    case HPMV: {  /* sbmv(k, alpha, a, x, incx, offx, beta, y, incy, offy, lower, ow); spmv(n, alpha, ap, x, ...) */
        PyArrayObject *a, *out;
        scalar_t beta;
        long kk;
        int n, ik, lda, lo;
        char uplo;
        int band = (kind == SBMV || kind == HBMV);
        if ((kk = get_size(args[0], band ? 0 : 1)) < 0) Py_RETURN_NOTIMPLEMENTED;
        if (!is_int(args[4], 1) || !is_int(args[5], 0) || args[7] != Py_None || !is_int(args[8], 1)
            || !is_int(args[9], 0) || (lo = get_flag(args[10], 1)) < 0)
            Py_RETURN_NOTIMPLEMENTED;
        if ((x = plain_vector(args[3], prec, 0)) == NULL) Py_RETURN_NOTIMPLEMENTED;
        if (band) {
            if ((a = fortran_matrix(args[2], prec)) == NULL || kk > PyArray_DIM(a, 0) - 1) Py_RETURN_NOTIMPLEMENTED;
            n = (int)PyArray_DIM(a, 1);
            lda = (int)PyArray_DIM(a, 0);
        }
        else {
            if ((a = plain_vector(args[2], prec, 0)) == NULL) Py_RETURN_NOTIMPLEMENTED;
            n = (int)kk;
            lda = 0;
            if (PyArray_SIZE(a) < (npy_intp)n * (n + 1) / 2) Py_RETURN_NOTIMPLEMENTED;
        }
        if (PyArray_SIZE(x) < n) Py_RETURN_NOTIMPLEMENTED;
        if (!get_scalar(args[1], prec, 0, &s)) Py_RETURN_NOTIMPLEMENTED;
        if (!get_beta(args[6], prec, 0, &beta)) Py_RETURN_NOTIMPLEMENTED;
        if ((out = zero_vector(prec, n)) == NULL) return NULL;
        uplo = lo ? 'L' : 'U';
        ik = (int)kk;
        if (band)
            RUN((long)n * (ik + 1), ((sbmv_t)fn)(&uplo, &n, &ik, &s, PyArray_DATA(a), &lda, PyArray_DATA(x), &one,
                                                 &beta, PyArray_DATA(out), &one, 1));
        else
            RUN((long)n * n, ((spmv_t)fn)(&uplo, &n, &s, PyArray_DATA(a), PyArray_DATA(x), &one, &beta,
                                            PyArray_DATA(out), &one, 1));
        return (PyObject *)out;
    }
    case TBMV:
    case TBSV:
    case TPMV:
    case TPSV: {  /* tbmv(k, a, x, incx, offx, lower, trans, diag, ow_x); tpmv(n, ap, x, incx, offx, ...) */
        PyArrayObject *a, *out;
        long kk;
        int n, ik, lda, lo, tr, dg, ow;
        char uplo, t, diag;
        int band = (kind == TBMV || kind == TBSV);
        if ((kk = get_size(args[0], band ? 0 : 1)) < 0 || !is_int(args[3], 1) || !is_int(args[4], 0))
            Py_RETURN_NOTIMPLEMENTED;
        lo = get_flag(args[5], 1);
        tr = get_flag(args[6], 2);
        dg = get_flag(args[7], 1);
        ow = get_overwrite(args[8]);
        if (lo < 0 || tr < 0 || dg < 0 || ow < 0) Py_RETURN_NOTIMPLEMENTED;
        if (band) {
            if ((a = fortran_matrix(args[1], prec)) == NULL || kk > PyArray_DIM(a, 0) - 1) Py_RETURN_NOTIMPLEMENTED;
            n = (int)PyArray_DIM(a, 1);
            lda = (int)PyArray_DIM(a, 0);
        }
        else {
            if ((a = plain_vector(args[1], prec, 0)) == NULL) Py_RETURN_NOTIMPLEMENTED;
            n = (int)kk;
            lda = 0;
            if (PyArray_SIZE(a) < (npy_intp)n * (n + 1) / 2) Py_RETURN_NOTIMPLEMENTED;
        }
        if ((x = plain_vector(args[2], prec, 0)) == NULL || PyArray_SIZE(x) < n) Py_RETURN_NOTIMPLEMENTED;
        if (ow && overlaps(x, a)) Py_RETURN_NOTIMPLEMENTED;
        if ((out = inout_vector(args[2], prec, ow)) == NULL) return PyErr_Occurred() ? NULL : Py_NewRef(Py_NotImplemented);
        uplo = lo ? 'L' : 'U';
        t = "NTC"[tr];
        diag = dg ? 'U' : 'N';
        ik = (int)kk;
        if (band)
            RUN((long)n * (ik + 1), ((tbmv_t)fn)(&uplo, &t, &diag, &n, &ik, PyArray_DATA(a), &lda,
                                                 PyArray_DATA(out), &one, 1, 1, 1));
        else
            RUN((long)n * n, ((tpmv_t)fn)(&uplo, &t, &diag, &n, PyArray_DATA(a), PyArray_DATA(out), &one, 1, 1, 1));
        return (PyObject *)out;
    }
    case SPR:
    case HPR:
    case SPR2:
    case HPR2: {  /* spr(n, alpha, x, ap, incx, offx, lower, ow_ap); spr2(n, alpha, x, y, ap, incx, offx, incy,
                   * offy, lower, ow_ap) */
        PyArrayObject *ap, *out;
        long nn;
        int n, lo, ow, two = (kind == SPR2 || kind == HPR2);
        int o = two ? 1 : 0;
        char uplo;
        if ((nn = get_size(args[0], 1)) < 0 || !is_int(args[4 + o], 1) || !is_int(args[5 + o], 0))
            Py_RETURN_NOTIMPLEMENTED;
        if (two && (!is_int(args[7], 1) || !is_int(args[8], 0))) Py_RETURN_NOTIMPLEMENTED;
        lo = get_flag(args[two ? 9 : 6], 1);
        ow = get_overwrite(args[two ? 10 : 7]);
        if (lo < 0 || ow < 0) Py_RETURN_NOTIMPLEMENTED;
        n = (int)nn;
        if ((x = plain_vector(args[2], prec, 0)) == NULL || PyArray_SIZE(x) < n) Py_RETURN_NOTIMPLEMENTED;
        y = NULL;
        if (two && ((y = plain_vector(args[3], prec, 0)) == NULL || PyArray_SIZE(y) < n)) Py_RETURN_NOTIMPLEMENTED;
        if ((ap = plain_vector(args[3 + o], prec, 0)) == NULL || PyArray_SIZE(ap) < (npy_intp)n * (n + 1) / 2)
            Py_RETURN_NOTIMPLEMENTED;
        if (kind == HPR && PyComplex_Check(args[1])) Py_RETURN_NOTIMPLEMENTED;
        if (!get_scalar(args[1], prec, kind == HPR, &s)) Py_RETURN_NOTIMPLEMENTED;
        if (ow && (overlaps(ap, x) || (y != NULL && overlaps(ap, y)))) Py_RETURN_NOTIMPLEMENTED;
        if ((out = inout_vector(args[3 + o], prec, ow)) == NULL) return PyErr_Occurred() ? NULL : Py_NewRef(Py_NotImplemented);
        uplo = lo ? 'L' : 'U';
        if (two)
            RUN((long)n * n, ((spr2_t)fn)(&uplo, &n, &s, PyArray_DATA(x), &one, PyArray_DATA(y), &one,
                                            PyArray_DATA(out), 1));
        else
            RUN((long)n * n, ((spr_t)fn)(&uplo, &n, &s, PyArray_DATA(x), &one, PyArray_DATA(out), 1));
        return (PyObject *)out;
    }
    default:
        Py_RETURN_NOTIMPLEMENTED;
    }
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
    if (routine_init(&self->r, level12_small, NARGS[f], NULL, NULL, NULL, "Level12") < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}


static PyObject *
level12_repr(Level12Object *self)
{
    if (self->r.front.fallback != NULL) return front_repr((PyObject *)self);
    return PyUnicode_FromFormat("<tileblas small-call path of %s (%c)>", KIND[self->kind], PREFIXES[self->prec]);
}

static PyTypeObject Level12Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tileblas.blas._fastpath.Level12",
    .tp_basicsize = sizeof(Level12Object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Level12(kind, prefix, address): the small-call path of one Level-1/2 routine; called with\n"
              "all the routine's arguments positionally, it returns the result or NotImplemented.\n"
              "small.front(fallback, names, defaults) puts it in front of the Python implementation.",
    .tp_new = level12_new,
    .tp_dealloc = (destructor)routine_dealloc,
    .tp_traverse = (traverseproc)routine_traverse,
    .tp_clear = (inquiry)routine_clear,
    .tp_dictoffset = offsetof(Routine, front) + offsetof(Front, dict),
    .tp_methods = front_methods,
    .tp_getset = front_getset,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Routine, vectorcall),
    .tp_repr = (reprfunc)level12_repr,
};

/* ----------------------------------------------------------------------------------- module state */

static int
family_index(PyObject *key)
{
    const char *s = PyUnicode_AsUTF8(key);
    if (s == NULL) return -1;
    for (int i = 0; i < NFAM; i++)
        if (strcmp(s, FAMILY[i]) == 0) return i;
    PyErr_Format(PyExc_ValueError, "unknown Level-3 family %R", key);
    return -1;
}

/* "dtrmm/L" -> (family TRMM or TRSM, precision index, side index); -1 when the key is not of that form. */
static int
tri_key(const char *s, int *prec, int *side)
{
    size_t len = strlen(s);
    if (len != 7 || s[5] != '/' || (s[6] != 'L' && s[6] != 'R')) return -1;
    if ((*prec = prefix_index(s[0])) < 0) return -1;
    *side = s[6] == 'R';
    if (strncmp(s + 1, "trmm", 4) == 0) return TRMM;
    if (strncmp(s + 1, "trsm", 4) == 0) return TRSM;
    return -1;
}

/* A routine name ("dgemm") -> its family, *prec its precision; -1 (no exception) when key is not one. */
static int
routine_key(PyObject *key, int *prec)
{
    const char *s = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
    if (s == NULL || (*prec = prefix_index(s[0])) < 0) {
        PyErr_Clear();
        return -1;
    }
    for (int i = 0; i < NFAM; i++)
        if (strcmp(s + 1, FAMILY[i]) == 0) return i;
    return -1;
}

/* d[name] = v, v's reference taken over: 0, or -1 with d released (v NULL: its exception stands). */
static int
dict_put(PyObject *d, const char *name, PyObject *v)
{
    if (v == NULL || PyDict_SetItemString(d, name, v) < 0) {
        Py_XDECREF(v);
        Py_DECREF(d);
        return -1;
    }
    Py_DECREF(v);
    return 0;
}

static PyObject *
set_level3_limits(PyObject *mod, PyObject *arg)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    double newlim[NFAM], newtri[2][4][2];
    if (!PyDict_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "set_level3_limits takes a dict {family or 'dtrmm/L': flops}");
        return NULL;
    }
    memcpy(newlim, limits, sizeof limits);
    memcpy(newtri, tri_limits, sizeof tri_limits);
    while (PyDict_Next(arg, &pos, &key, &value)) {
        const char *s = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        int f, p, sd;
        double v = PyFloat_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred()) return NULL;
        if (s != NULL && (f = tri_key(s, &p, &sd)) >= 0) {  /* one precision and side of trmm/trsm */
            newtri[f - TRMM][p][sd] = v;
            continue;
        }
        if ((f = family_index(key)) < 0) return NULL;
        newlim[f] = v;
        if (f == TRMM || f == TRSM)  /* a family's limit: every precision and side */
            for (p = 0; p < 4; p++) newtri[f - TRMM][p][0] = newtri[f - TRMM][p][1] = v;
    }
    memcpy(limits, newlim, sizeof limits);
    memcpy(tri_limits, newtri, sizeof tri_limits);
    Py_RETURN_NONE;
}

static PyObject *
get_level3_limits(PyObject *mod, PyObject *unused)
{
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    for (int i = 0; i < NFAM; i++)
        if (dict_put(d, FAMILY[i], PyFloat_FromDouble(limits[i])) < 0) return NULL;
    for (int f = 0; f < 2; f++)
        for (int p = 0; p < 4; p++)
            for (int sd = 0; sd < 2; sd++) {
                char name[8];
                snprintf(name, sizeof name, "%c%s/%c", PREFIXES[p], FAMILY[TRMM + f], "LR"[sd]);
                if (dict_put(d, name, PyFloat_FromDouble(tri_limits[f][p][sd])) < 0) return NULL;
            }
    return d;
}

static PyObject *
set_recursion_windows(PyObject *mod, PyObject *arg)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    double neww[2][4][2][3];
    if (!PyDict_Check(arg)) {
        PyErr_SetString(PyExc_TypeError,
                        "set_recursion_windows takes a dict {'dtrmm/L': (min_order, rhs_lo, rhs_hi) or None}");
        return NULL;
    }
    memcpy(neww, tri_window, sizeof tri_window);
    while (PyDict_Next(arg, &pos, &key, &value)) {
        const char *s = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        int f, p, sd;
        double v[3] = {0, 0, 0};
        if (s == NULL || (f = tri_key(s, &p, &sd)) < 0) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "set_recursion_windows: unknown key %R (expected e.g. 'dtrmm/L')", key);
            return NULL;
        }
        if (value != Py_None) {
            if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 3) {
                PyErr_Format(PyExc_ValueError, "set_recursion_windows: %s must be (min_order, rhs_lo, rhs_hi) or "
                             "None, got %R", s, value);
                return NULL;
            }
            for (int i = 0; i < 3; i++) {
                v[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(value, i));
                if (v[i] == -1.0 && PyErr_Occurred()) return NULL;
            }
            if (!(v[0] >= 1)) {
                PyErr_Format(PyExc_ValueError, "set_recursion_windows: %s min_order must be >= 1, got %R", s, value);
                return NULL;
            }
        }
        memcpy(neww[f - TRMM][p][sd], v, sizeof v);
    }
    memcpy(tri_window, neww, sizeof tri_window);
    Py_RETURN_NONE;
}

static PyObject *
get_recursion_windows(PyObject *mod, PyObject *unused)
{
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    for (int f = 0; f < 2; f++)
        for (int p = 0; p < 4; p++)
            for (int sd = 0; sd < 2; sd++) {
                char name[8];
                const double *w = tri_window[f][p][sd];
                snprintf(name, sizeof name, "%c%s/%c", PREFIXES[p], FAMILY[TRMM + f], "LR"[sd]);
                if (dict_put(d, name, w[0] > 0 ? Py_BuildValue("(ddd)", w[0], w[1], w[2]) : Py_NewRef(Py_None)) < 0)
                    return NULL;
            }
    return d;
}

static PyObject *
set_one_thread(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    double newlim[NFAM] = {0};
    void *newent[NFAM][4] = {{NULL}};
    if (nargs != 2 || !PyDict_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "set_one_thread takes two dicts: {family: flops} and {'dtrmm': address, ...}");
        return NULL;
    }
    while (PyDict_Next(args[0], &pos, &key, &value)) {
        int f = family_index(key);
        double v;
        if (f < 0) return NULL;
        v = PyFloat_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred()) return NULL;
        newlim[f] = v;
    }
    pos = 0;
    while (PyDict_Next(args[1], &pos, &key, &value)) {
        int p, f = routine_key(key, &p);
        void *addr;
        if (f < 0) {
            PyErr_Format(PyExc_ValueError, "set_one_thread: unknown Level-3 routine %R", key);
            return NULL;
        }
        addr = PyLong_AsVoidPtr(value);
        if (addr == NULL && PyErr_Occurred()) return NULL;
        newent[f][p] = addr;
    }
    memcpy(one_limits, newlim, sizeof one_limits);
    memcpy(entry1, newent, sizeof entry1);
    Py_RETURN_NONE;
}

static PyObject *
set_split(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    double lo[NFAM][4], hi[NFAM][4];
    int slot;
    void *get = NULL;
    if (nargs != 3 || !PyLong_Check(args[0]) || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "set_split takes a pool slot (or -1), the address of the instance's "
                                         "openblas_get_num_threads and {'zhemm': (lo, hi), ...}");
        return NULL;
    }
    slot = (int)PyLong_AsLong(args[0]);
    if (slot == -1 && PyErr_Occurred()) return NULL;
    if (slot >= 0) {
        get = PyLong_AsVoidPtr(args[1]);
        if (get == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "set_split: the openblas_get_num_threads address is 0");
            return NULL;
        }
        if (pool_api == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "set_split: no thread pool in this build");
            return NULL;
        }
        if (pool_api->threads(slot) < 2) {
            PyErr_Format(PyExc_ValueError, "set_split: slot %d is not a slot of a multi-threaded instance", slot);
            return NULL;
        }
    }
    for (int f = 0; f < NFAM; f++)
        for (int p = 0; p < 4; p++) lo[f][p] = hi[f][p] = 0.0;
    while (PyDict_Next(args[2], &pos, &key, &value)) {
        int p, f = routine_key(key, &p);
        double l, h;
        if (f < GEMM || f >= NFAM) {
            PyErr_Format(PyExc_ValueError, "set_split: %R is not a Level-3 routine", key);
            return NULL;
        }
        if (!PyTuple_Check(value)) {
            PyErr_Format(PyExc_TypeError, "set_split: %R takes a tuple (lo, hi) of flops, not %R", key, value);
            return NULL;
        }
        if (!PyArg_ParseTuple(value, "dd;set_split: each routine takes (lo, hi) flops", &l, &h)) return NULL;
        lo[f][p] = l;
        hi[f][p] = h;
    }
    memcpy(split_lo, lo, sizeof lo);
    memcpy(split_hi, hi, sizeof hi);
    split_threads = (int (*)(void))get;
    split_slot = slot;
    Py_RETURN_NONE;
}

static PyObject *
get_split_calls(PyObject *mod, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong(split_calls);
}

static PyObject *
get_split(PyObject *mod, PyObject *unused)
{
    PyObject *d = PyDict_New();
    if (d == NULL || split_slot < 0) return d;
    for (int f = 0; f < NFAM; f++)
        for (int p = 0; p < 4; p++) {
            char name[16];
            if (!(split_hi[f][p] > split_lo[f][p])) continue;
            snprintf(name, sizeof name, "%c%s", PREFIXES[p], FAMILY[f]);
            if (dict_put(d, name, Py_BuildValue("(dd)", split_lo[f][p], split_hi[f][p])) < 0) return NULL;
        }
    return d;
}

static PyObject *
set_rank_gemm(PyObject *mod, PyObject *arg)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    double lim[NFAM][4][2];
    if (!PyDict_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "set_rank_gemm takes a dict {'dsyrk': (one_call, split), ...}");
        return NULL;
    }
    memset(lim, 0, sizeof lim);
    while (PyDict_Next(arg, &pos, &key, &value)) {
        int p, f = routine_key(key, &p);
        double one, split;
        if ((f != SYRK && f != SYR2K) || p >= 2) {
            PyErr_Format(PyExc_ValueError, "set_rank_gemm: %R is not a real syrk or syr2k routine", key);
            return NULL;
        }
        if (!PyTuple_Check(value)) {
            PyErr_Format(PyExc_TypeError, "set_rank_gemm: %R takes a tuple (one_call, split) of flops, not %R", key,
                         value);
            return NULL;
        }
        if (!PyArg_ParseTuple(value, "dd;set_rank_gemm: each routine takes (one_call, split) flops", &one, &split))
            return NULL;
        lim[f][p][0] = one;
        lim[f][p][1] = split;
    }
    memcpy(rank_gemm, lim, sizeof lim);
    Py_RETURN_NONE;
}

static PyObject *
get_rank_gemm(PyObject *mod, PyObject *unused)
{
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    for (int f = SYRK; f <= SYR2K; f += SYR2K - SYRK)
        for (int p = 0; p < 2; p++) {
            char name[16];
            if (!(rank_gemm[f][p][0] > 0 || rank_gemm[f][p][1] > 0)) continue;
            snprintf(name, sizeof name, "%c%s", PREFIXES[p], FAMILY[f]);
            if (dict_put(d, name, Py_BuildValue("(dd)", rank_gemm[f][p][0], rank_gemm[f][p][1])) < 0) return NULL;
        }
    return d;
}

static PyObject *
get_rank_gemm_calls(PyObject *mod, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong(rank_gemm_calls);
}

static PyObject *
get_one_thread(PyObject *mod, PyObject *unused)
{
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    for (int i = 0; i < NFAM; i++) {
        int any = 0;
        for (int p = 0; p < 4; p++) any |= entry1[i][p] != NULL;
        if (!(one_limits[i] > 0) || !any) continue;
        if (dict_put(d, FAMILY[i], PyFloat_FromDouble(one_limits[i])) < 0) return NULL;
    }
    return d;
}

static PyObject *
set_level3_library(PyObject *mod, PyObject *arg)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    void *newentry[NFAM][4];
    if (!PyDict_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "set_level3_library takes a dict {'dgemm': address, ...}");
        return NULL;
    }
    memset(newentry, 0, sizeof newentry);
    while (PyDict_Next(arg, &pos, &key, &value)) {
        int p, f = routine_key(key, &p);
        void *addr;
        if (f < 0) {
            PyErr_Format(PyExc_ValueError, "unknown Level-3 routine %R", key);
            return NULL;
        }
        addr = PyLong_AsVoidPtr(value);
        if (addr == NULL && PyErr_Occurred()) return NULL;
        newentry[f][p] = addr;
    }
    memcpy(entry, newentry, sizeof entry);
    Py_RETURN_NONE;
}

static PyObject *
set_decline(PyObject *mod, PyObject *flag)
{
    int on = PyObject_IsTrue(flag), was = declined;
    if (on < 0) return NULL;
    declining += (on != 0) - (was != 0);
    declined = on != 0;
    return PyBool_FromLong(was);
}

static PyObject *
set_state(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    int on;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "set_state(enabled, contextvar)");
        return NULL;
    }
    on = PyObject_IsTrue(args[0]);
    if (on < 0) return NULL;
    if (args[1] != Py_None && !PyContextVar_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "contextvar must be a contextvars.ContextVar or None");
        return NULL;
    }
    Py_XINCREF(args[1] == Py_None ? NULL : args[1]);
    Py_XSETREF(current_var, args[1] == Py_None ? NULL : args[1]);
    enabled = on;
    Py_RETURN_NONE;
}

static PyObject *
is_enabled(PyObject *mod, PyObject *unused)
{
    return PyBool_FromLong(enabled);
}

static PyMethodDef methods[] = {
    {"set_level3_limits", set_level3_limits, METH_O,
     "set_level3_limits({family: flops}): calls with at least this many flops take the Python path\n"
     "('dtrmm/L'-style keys: one precision and side of trmm/trsm)."},
    {"get_level3_limits", get_level3_limits, METH_NOARGS, "The flop limits in force, per family."},
    {"set_recursion_windows", set_recursion_windows, METH_O,
     "set_recursion_windows({'dtrmm/L': (min_order, rhs_lo, rhs_hi) or None}): trmm/trsm calls of these\n"
     "shapes (the recursion may take them) take the Python path."},
    {"get_recursion_windows", get_recursion_windows, METH_NOARGS, "The recursion windows in force."},
    {"set_split", (PyCFunction)(void (*)(void))set_split, METH_FASTCALL,
     "set_split(slot, get_num_threads_address, {'zhemm': (lo, hi), ...}): calls with flops in [lo, hi) run as\n"
     "independent parts (one per thread of the instance's setting in force) on the\n"
     "one-thread instance, claimed by the calling thread and the pool slot's workers; slot -1 turns it off"},
    {"get_split", get_split, METH_NOARGS, "The split limits in force: {'zhemm': (lo, hi), ...}."},
    {"split_calls", get_split_calls, METH_NOARGS, "How many calls ran split so far."},
    {"set_one_thread", (PyCFunction)(void (*)(void))set_one_thread, METH_FASTCALL,
     "set_one_thread({family: flops}, {'dtrmm': address, ...}): calls below these flops run on these entry\n"
     "points (tileblas' one-thread OpenBLAS instance); replaces the previous setting."},
    {"get_one_thread", get_one_thread, METH_NOARGS, "The one-thread limits in force: {family: flops}."},
    {"set_rank_gemm", set_rank_gemm, METH_O,
     "set_rank_gemm({'dsyrk': (one_call, split), ...}): real syrk/syr2k calls with a new c and trans 'N'\n"
     "below these flops (one_call: where the gemm is one call; split: where it runs split on the pool) run as\n"
     "gemm over the whole of C; replaces the previous setting."},
    {"get_rank_gemm", get_rank_gemm, METH_NOARGS,
     "The rank-k-by-gemm limits in force: {'dsyrk': (one_call, split), ...}."},
    {"rank_gemm_calls", get_rank_gemm_calls, METH_NOARGS, "How many syrk/syr2k calls ran as gemm so far."},
    {"set_level3_library", set_level3_library, METH_O,
     "set_level3_library({'dgemm': address, ...}): the Fortran entry points the small-call path calls."},
    {"decline", set_decline, METH_O,
     "decline(flag) -> previous: while set, every call of this thread takes the Python path."},
    {"set_state", (PyCFunction)(void (*)(void))set_state, METH_FASTCALL,
     "set_state(enabled, contextvar): turn the small-call path on or off; the current-runtime variable."},
    {"enabled", is_enabled, METH_NOARGS, "Whether the small-call path is on."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "tileblas.blas._fastpath", "The small-call path of the drop-in BLAS routines.", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__fastpath(void)
{
    PyObject *m;
    import_array();
    aligned_capsule = PyCapsule_New(&aligned_handler, "mem_handler", NULL);
    if (aligned_capsule == NULL) return NULL;
    if (PyType_Ready(&Level3Type) < 0) return NULL;
    m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyType_Ready(&Level12Type) < 0) return NULL;
    Py_INCREF(&Level3Type);
    if (PyModule_AddObject(m, "Level3", (PyObject *)&Level3Type) < 0) {
        Py_DECREF(&Level3Type);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&Level12Type);
    if (PyModule_AddObject(m, "Level12", (PyObject *)&Level12Type) < 0) {
        Py_DECREF(&Level12Type);
        Py_DECREF(m);
        return NULL;
    }
    {
        pool_api = (const PoolAPI *)PyCapsule_Import(POOL_CAPSULE, 0);
        if (pool_api == NULL)
            PyErr_Clear(); /* no pool here: calls are not split */
        else if (pool_api->version != POOL_API_VERSION)
            pool_api = NULL; /* a _pool of another build: not split */
    }
    return m;
}
