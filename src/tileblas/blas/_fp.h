/*
 * _fp.h -- what the files of tileblas.blas._fastpath (the drop-in's small-call path) share.
 *
 * The module in files, each one stage or one kind of work (docs/developer/drop-in-internals.md,
 * "The small-call path"):
 *
 *   _fastpath.c      the module: its methods, its import
 *   _fp_front.c      binding a call's arguments to the routine's parameters, the front (the fallback to the
 *                    Python implementation), the routine objects' common part, scalars and flags as C reads them
 *   _fp_arrays.c     the arrays the path makes (64-byte boundary), copies, conjugation, the output
 *   _fp_decide.c     the configuration (set in one call, configure) and decide(): the path of a Level-3 call
 *   _fp_level3.c     Level 3 in stages over one call descriptor: bind -> normalise layout -> decide -> execute;
 *                    the parts of a split, the strips, the gemm route
 *   _fp_level12.c    Level 1/2
 *
 * A Level-3 call: bind (the arguments, by the family's signature table SIG3: the descriptor Call, or the
 * Python path) -> normalise (layouts: flags flipped for a C-ordered operand, what is copied) -> decide
 * (fp_decide: the Python path, one call on the one-thread instance or on the instance of the thread
 * setting, a split in N parts, the syrk gemm route) -> execute (allocate, copy, run).  Nothing is written
 * before execute, and execute never declines: everything that sends a call to Python is found before it.
 *
 * Every limit the path decides with is a field of the configuration (Config, fp_cfg), set from Python by
 * configure() (tileblas.blas._dispatch, from tileblas.policy._dropin's DropInConfig); none is a constant
 * here.  The pool's C API is kernels/_pool.h's.
 */
#ifndef TILEBLAS_FP_H
#define TILEBLAS_FP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define NPY_TARGET_VERSION NPY_1_22_API_VERSION /* PyDataMem_Handler, an array's mem_handler */
#define PY_ARRAY_UNIQUE_SYMBOL tileblas_fastpath_ARRAY_API
#ifndef FP_IMPORT_ARRAY /* only _fastpath.c, which calls import_array() */
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "_pool.h"

#if defined(__GNUC__)
#pragma GCC visibility push(hidden) /* the module's own: only PyInit__fastpath is exported */
#endif

/* ------------------------------------------------------------------------------------------ names */

enum { GEMM, SYMM, HEMM, SYRK, HERK, SYR2K, HER2K, TRMM, TRSM, NFAM };
extern const char *const FAMILY[NFAM];
extern const char PREFIXES[4];  /* s, d, c, z: a precision is an index into it */
extern const int TYPENUM[4];

/* The most parts of a split the job arrays hold; the configuration's max_parts is at most this. */
#define MAX_PARTS 64
#define MAX_PARAMS 16

typedef union {
    float f;
    double d;
    float cf[2];
    double cd[2];
} scalar_t;

/* ---------------------------------------------------------------------------------- configuration */

/* What decide() reads of one routine (a family in one precision), in one place. */
typedef struct {
    void *entry;                       /* Fortran entry point of the instance of the thread setting */
    void *entry1;                      /* ... of the one-thread instance (NULL: none) */
    double tile[2];                    /* flops from which the Python path (tiles) runs: side L, side R (the
                                        * same for the families without a side) */
    double window[2][3];               /* trmm/trsm, per side: the shapes the recursion may take (Python
                                        * path): order >= [0] with [1] <= right-hand sides <= [2]; [0] 0: none */
    double one_thread;                 /* below these flops: one call on the one-thread instance */
    double split[2];                   /* flops [lo, hi) run split on the pool */
    double rank_gemm[2];               /* real syrk/syr2k gemm route: [0] one call, [1] split, below */
    double pad_;                       /* 128 bytes: a routine's limits are found by shifts */
} Limits;

/* Everything the path reads, set in one call (configure, _fp_decide.c) and read by decide() and the
 * stages.  What each limit is: tileblas.policy._dropin.DropInConfig; why it has its value:
 * docs/measurements/drop-in.md, "Why each limit: the figures behind the small-call path's defaults". */
typedef struct {
    int enabled;                       /* the default runtime takes the native path for small calls */
    PyObject *contextvar;              /* the current-runtime variable (a value in it: Python path), owned */
    Limits r[NFAM][4];                 /* per routine */
    double limits[NFAM];               /* the families' tile limits as configured (config() gives them back) */
    int pool_slot;                     /* the pool slot of the instance (-1: none, no split) */
    int (*get_num_threads)(void);      /* the instance's openblas_get_num_threads: the setting in force */
    double gil_flops;                  /* Level 3: above these flops BLAS runs without the GIL */
    long gil_elements;                 /* Level 1/2: above these elements BLAS runs without the GIL */
    long convert_max;                  /* the most elements of an operand the path converts itself */
    int part_fraction, part_min;       /* a part of a split: at least order / part_fraction, part_min */
    int max_parts;                     /* the most parts of a split (<= MAX_PARTS) */
    double herk_copy_k[2];             /* herk/her2k C-ordered: copy from n >= this x k (single, double) */
    double gpu_ask;                    /* a call it would run with at least these flops asks gpu_hook */
    PyObject *gpu_hook;                /* gpu_hook(family, prefix, m, n, k) true: the GPUs take it (Python
                                        * path); NULL: none (owned) */
} Config;

extern Config fp_cfg;
extern const PoolAPI *pool_api;         /* tileblas.kernels._pool's C API, where it is built */
extern unsigned long long fp_split_calls, fp_rank_gemm_calls; /* counted under the GIL (stats()) */
#if defined(_MSC_VER)
extern __declspec(thread) int fp_declined;
#else
extern _Thread_local int fp_declined; /* decline(True) in this thread: every call takes the Python path */
#endif
extern int fp_declining;               /* threads with fp_declined set: read before the TLS flag */

/* ----------------------------------------------------------------------------- the routine objects */

/* The public face of a routine: its parameters and the Python implementation that takes every call the
 * small-call path declines.  fallback NULL: a bare small-call path, called with every argument
 * positionally, returning NotImplemented where it declines. */
typedef struct {
    PyObject *fallback;                /* the Python implementation */
    PyObject *names;                   /* tuple of the parameter names (interned str) */
    PyObject *defaults;                /* tuple: the defaults of the last len(defaults) parameters */
    PyObject *dict;                    /* __name__, __doc__, __wrapped__, ... (functools.update_wrapper) */
} Front;

/* What every routine object (Level3, Level12) starts with: its vectorcall, its front, its parameter
 * count and its small-call path, given all the arguments in order (the result, or NotImplemented having
 * written nothing, or NULL with an exception). */
typedef struct Routine Routine;
struct Routine {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Front front;
    Py_ssize_t nparams;
    PyObject *(*small)(Routine *, PyObject *const *);
};

/* _fp_front.c */
PyObject *const *bind_args(const Front *f, Py_ssize_t want, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames, PyObject **slot);
int routine_init(Routine *self, PyObject *(*small)(Routine *, PyObject *const *), Py_ssize_t nparams,
                 PyObject *fallback, PyObject *names, PyObject *defaults, const char *what);
int routine_traverse(Routine *self, visitproc visit, void *arg);
int routine_clear(Routine *self);
void routine_dealloc(Routine *self);
PyObject *front_repr(PyObject *self);
extern PyMethodDef front_methods[];
extern PyGetSetDef front_getset[];
int get_scalar(PyObject *o, int prec, int real_only, scalar_t *out);
int get_beta(PyObject *o, int prec, int real_only, scalar_t *out);
int int_value_other(PyObject *o, long *v);
int prefix_index(char c);

/* _fp_level3.c, _fp_level12.c */
extern PyTypeObject Level3Type, Level12Type;
/* The slots every routine type shares (its Routine head, its front, its vectorcall), in its
 * PyTypeObject after its name, size, doc, tp_new and tp_repr. */
#define ROUTINE_TYPE_SLOTS                                                                              \
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,                    \
    .tp_dealloc = (destructor)routine_dealloc, .tp_traverse = (traverseproc)routine_traverse,           \
    .tp_clear = (inquiry)routine_clear, .tp_dictoffset = offsetof(Routine, front) + offsetof(Front, dict), \
    .tp_methods = front_methods, .tp_getset = front_getset, .tp_call = PyVectorcall_Call,               \
    .tp_vectorcall_offset = offsetof(Routine, vectorcall)
PyObject *fp_decide_py(PyObject *mod, PyObject *const *args, size_t nargsf, PyObject *kwnames);

/* ---------------------------------------------------------------------------- the call descriptor */

/* An operand of a Level-3 call: the array (the caller's, borrowed), its layout as given, and how BLAS
 * reads it after the layout stage. */
typedef struct {
    PyArrayObject *arr;
    char layout;                       /* 'F' Fortran-contiguous, 'C' C-contiguous only, 0 neither */
    char copy;                         /* copied to Fortran order before the call (execute) */
    int ld;                            /* leading dimension as BLAS reads it */
} Operand;

/* One Level-3 call, from its arguments to what BLAS is given: filled by bind (the arguments), then by
 * normalise (the layouts), read by decide and execute. */
typedef struct {
    int fam, prec, cplx;
    /* bind: the flags as given (0, 1 or 2), the sizes and scalars */
    int side, lower, trans_a, trans_b, trans, diag, overwrite;
    int m, n, k;      /* gemm: op(a) m x k, op(b) k x n; symm/hemm, trmm/trsm: b m x n, a of order k;
                       * syrk family: c n x n, op(a) n x k */
    double flops;     /* complex counted 4x */
    scalar_t alpha, beta;
    int beta_zero;
    Operand a, b;     /* trmm/trsm: b is the operand written */
    PyObject *c;      /* the output as given: None (a new one) or the caller's array (plain, m x n) */
    /* normalise: the call as BLAS takes it */
    char f_side, f_uplo, f_ta, f_tb, f_trans, f_diag;
    int conj;         /* solved as its conjugate (hemm/herk/her2k on C-ordered operands) */
    int cbeta;        /* c given and read (beta not zero) */
    int fresh;        /* syrk family: a new c that BLAS writes whole in its triangle */
} Call;

/* The path of a Level-3 call: what decide() chose. */
typedef enum { PATH_PYTHON, PATH_ONE_THREAD, PATH_INSTANCE, PATH_SPLIT, PATH_RANK_GEMM } PathKind;
typedef struct {
    PathKind kind;
    int parts;        /* PATH_SPLIT, PATH_RANK_GEMM: parts on the pool (the gemm route: 0, one call) */
    void *fn;         /* the one call's entry point (also where the pool runs no part) */
    void *part_fn;    /* the parts' entry point (one-thread instance; the gemm route: its gemm) */
    void *part_gemm;  /* the strips' gemm (syrk/herk split) */
    int nogil;        /* the one call runs without the GIL (its flops above gil_flops) */
    const char *why;  /* PATH_PYTHON: why (decide() in Python says it) */
} Path;

/* _fp_decide.c */
Path fp_decide(const Call *c, const Config *cfg);
int fp_copy_beats_conjugate(const Call *c, const Config *cfg);
PyObject *fp_path_dict(const Path *p, const Call *c);
PyObject *fp_configure(PyObject *mod, PyObject *arg);
PyObject *fp_config(PyObject *mod, PyObject *unused);
PyObject *fp_stats(PyObject *mod, PyObject *unused);

/* ------------------------------------------------------------------------- arrays (_fp_arrays.c) */

extern PyObject *fp_aligned_capsule;
int fp_arrays_init(void);
PyArrayObject *new_array(int nd, npy_intp *dims, int typenum, int fortran, int zero);
PyArrayObject *fortran_empty(PyArrayObject *a);
PyArrayObject *fortran_copy(PyArrayObject *a);
PyArrayObject *fortran_copy_as(PyArrayObject *a, int prec, int conj);
PyObject *cast_copy(PyArrayObject *a, int prec);
PyObject *convert_operand(PyObject *o, int prec, int inout, int overwrite, int *inplace);
PyObject *convert_array(PyObject *o, int prec);
PyArrayObject *output(PyObject *given, int prec, int overwrite, npy_intp m, npy_intp n, int zero,
                      PyArrayObject **inputs, int ninputs, PyArrayObject **copies);
void copy_piece(char *dst, npy_intp ldd, const char *src, npy_intp rs, npy_intp cs, npy_intp rows, npy_intp cols,
                int prec, int conj);
void conj_piece(char *c, npy_intp ldc, npy_intp rows, npy_intp cols, int prec);
void conj_triangle(char *c, npy_intp ldc, npy_intp n, int lower, int prec);
void zero_other_triangle(char *c, npy_intp ldc, npy_intp n, int lower, size_t es);
void conj_scalar(scalar_t *v, int prec);

/* ----------------------------------------------------------------------- small shared helpers */

/* Run the BLAS call ``stmt`` without the GIL when ``release`` is true, else holding it.  Without the GIL
 * the call is counted in flight (the pool's enter/leave: fork() and the interpreter's exit wait for it). */
#define RUN_IF(release, stmt)                     \
    do {                                          \
        if (release) {                            \
            Py_BEGIN_ALLOW_THREADS                \
            if (pool_api != NULL) pool_api->enter(); \
            stmt;                                 \
            if (pool_api != NULL) pool_api->leave(); \
            Py_END_ALLOW_THREADS                  \
        }                                         \
        else {                                    \
            stmt;                                 \
        }                                         \
    } while (0)

/* Bytes per element of precision prec (s, d, c, z). */
static inline size_t
elsize(int prec)
{
    return prec == 0 ? 4 : prec == 3 ? 16 : 8;
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

/* The int objects 0, 1 and 2 (CPython's cached small ints, a reference held: made at import).  Flags,
 * offsets and increments nearly always arrive as these: they are recognised before any conversion. */
extern PyObject *fp_small_int[3];

/* An integer flag: None -> 0; an integer (int_value) in [0, hi] (hi >= 1); -1 otherwise (Python path). */
static inline int
get_flag(PyObject *o, int hi)
{
    long v;
    if (o == fp_small_int[0] || o == Py_None) return 0;
    if (o == fp_small_int[1]) return 1;
    if (!int_value(o, &v)) return -1;
    return (v >= 0 && v <= hi) ? (int)v : -1;
}

/* overwrite_*: None -> 0, an integer (int_value) -> (v != 0), -1 otherwise. */
static inline int
get_overwrite(PyObject *o)
{
    long v;
    if (o == fp_small_int[0] || o == Py_None) return 0;
    if (o == fp_small_int[1]) return 1;
    if (!int_value(o, &v)) return -1;
    return v != 0;
}

/* An integer (int_value) equal to ``v`` (0 or 1: offsets, increments). */
static inline int
is_int(PyObject *o, long v)
{
    long got;
    if (o == fp_small_int[v]) return 1;
    return int_value(o, &got) && got == v;
}

/* Whether a scalar of precision ``prec`` is zero. */
static inline int
is_zero(const scalar_t *v, int prec)
{
    switch (prec) {
    case 0: return v->f == 0;
    case 1: return v->d == 0;
    case 2: return v->cf[0] == 0 && v->cf[1] == 0;
    default: return v->cd[0] == 0 && v->cd[1] == 0;
    }
}

/* A 2-D operand of the routine's dtype, as given (no conversion): NULL when not one (Python path). */
static inline PyArrayObject *
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
static inline char
layout(PyArrayObject *a)
{
    if (PyArray_IS_F_CONTIGUOUS(a)) return 'F';
    if (PyArray_IS_C_CONTIGUOUS(a)) return 'C';
    return 0;
}

/* Leading dimension of a Fortran-contiguous operand. */
static inline int
ld(PyArrayObject *a)
{
    npy_intp r = PyArray_DIM(a, 0);
    return (int)(r > 1 ? r : 1);
}

/* Whether an output given with overwrite set is written in place (else the call writes a copy). */
static inline int
writes_in_place(PyArrayObject *c, int overwrite)
{
    return overwrite && PyArray_IS_F_CONTIGUOUS(c) && PyArray_ISWRITEABLE(c);
}

static inline int
overlaps(PyArrayObject *a, PyArrayObject *b)
{
    char *a0 = PyArray_BYTES(a), *b0 = PyArray_BYTES(b);
    char *a1 = a0 + PyArray_NBYTES(a), *b1 = b0 + PyArray_NBYTES(b);
    return a0 < b1 && b0 < a1;
}

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
