/*
 * tileblas.rblas._guard -- the native half of compute mode's non-finite safety (tileblas.rblas._safety).
 *
 * A compute-mode forward call must know whether its inverse can restore the outputs: an Inf or a NaN that
 * reaches an output (from an input, or from an overflow) destroys the values it replaces.  A separate pass
 * over the operands costs as much as a memory-bound call itself (daxpy reads x and y and writes y: one
 * more read of y is a third more time, a read of x and y before it twice the time), so the check runs
 * where the data are in cache anyway:
 *
 *   guarded(...)  Level 1 (axpy, scal, rot, rotm) and ger: the call in chunks of about CHUNK_BYTES of
 *                 output, in the parts OpenBLAS cuts the plain call into, run at once on tileblas' thread
 *                 pool (kernels/_pool.h).  A chunk's operands are read for Inf, NaN or large values as
 *                 they come into cache, then the chunk is computed by the same BLAS routine on the
 *                 one-thread instance (these routines are elementwise in their outputs: a chunk of columns
 *                 of ger, a chunk of elements of axpy), so every element gets the plain call's bits; a
 *                 risky chunk is copied first and its copy kept where an output holds a non-finite value
 *                 after the call.  axpy at unit strides, where the CPU and the BLAS kernel allow, runs in
 *                 one pass instead (fused_daxpy: y kept aside in L1 as it is overwritten, the result's
 *                 exponent checked).  The fingerprints of the arrays the call covers whole are gathered
 *                 from the chunks too.
 *   syr(...)      real syr: one axpy per column of the triangle on the one-thread instance, as OpenBLAS
 *                 computes the call (its bits), each column read just before its axpy (see "syr, in
 *                 columns" below), in parts on the pool.
 *   rank(...)     syr2, spr2, her, hpr, her2, hpr2 the same way: one axpy per term per column, the
 *                 Hermitian diagonal's imaginary part zeroed, a zero x[j]'s (y[j]'s) term skipped where
 *                 the plain call's path skips it ("the other rank updates, in columns" below).
 *   nonfinite(a), triangle(a, lower)
 *                 whether an array (or the triangle a symmetric rank update reads and writes) holds an
 *                 Inf or a NaN (or a large value), without a temporary array, the GIL released and split
 *                 on the pool for large arrays.
 *
 * An element is non-finite when every bit of its exponent is set; (bits & EXP) + CARRY carries into the
 * sign bit exactly then (or from a chosen exponent on: "large"), so a chunk is scanned with and/add/or
 * only, vectorised by the compiler in one copy per vector width.
 *
 * Every BLAS call here is made without the GIL, between the pool's enter() and leave() (fork() and the
 * interpreter's exit wait for it).  Operands are checked here (dtype, rank, layout, alignment, byte order,
 * bounds, overlap): what guarded() does not take, it declines having done nothing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "_pool.h"

static const PoolAPI *pool_api = NULL;

/* Run parts on the pool, its sleeping workers woken (these calls are long enough to pay for it). */
#define RUN_PARTS(slot, part, nparts, size, data) pool_api->run_parts(slot, part, nparts, size, data, 1)

/* About this many bytes of output per chunk: the chunk's inputs, its output and the copy of the output
 * fit in a core's L2 cache with room to spare. */
static npy_intp CHUNK_BYTES = 4 * 1024;
/* Arrays of at least this many bytes are scanned in parts on the pool; a call of at least this many
 * bytes of output runs its chunks in parts. */
static npy_intp PARALLEL_BYTES = 512 * 1024;
#define MAX_PARTS 64
/* OpenBLAS runs axpy on one thread up to this many elements (interface/axpy.c, zaxpy.c). */
#define SPLIT_FROM 10000
/* Parts of whole chunks per thread (claimed: a late worker leaves its share to the others). */
#define PARTS_PER_THREAD 4

/* ------------------------------------------------------------------------------------------ scanning */

/* The constant that, added to a real's exponent bits, carries into its sign bit exactly where the biased
 * exponent is at least t (t = 2047 / 255: Inf and NaN only). */
#define CARRY64(t) ((uint64_t)(2048 - (t)) << 52)
#define CARRY32(t) ((uint32_t)(256 - (t)) << 23)
#define EXP64 0x7ff0000000000000ULL
#define EXP32 0x7f800000U
#define NONFINITE64 2047
#define NONFINITE32 255

/* Biased exponents from which an operand may make a call overflow: with every scalar below 2**20 in
 * magnitude (else every chunk is read again after its call), elements below 2**1000 (single: 2**100) and
 * the vectors of a rank update below 2**490 (2**45) make every result and every inverse below 2**1022
 * (2**122).  An Inf or a NaN has the largest exponent, so one test finds both. */
#define SAFE_BIG64 (1023 + 1000)
#define SAFE_BIG32 (127 + 100)
#define SAFE_VEC64 (1023 + 490)
#define SAFE_VEC32 (127 + 45)

/* The scans run at memory speed only with wide vectors: one copy of them per vector width, the widest the
 * CPU has chosen when the module loads (GCC's function multi-versioning). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define WIDEST __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define WIDEST
#endif

/* Whether any of n reals of `size` bytes (4 or 8) at p, `stride` bytes apart, has a biased exponent of at
 * least t (t NONFINITE64/32: is Inf or NaN). */
WIDEST static int
scan_reals(const char *p, npy_intp n, npy_intp stride, int size, int t)
{
    if (size == 8) {
        const uint64_t E = EXP64, C = CARRY64(t);
        uint64_t acc = 0;
        if (stride == 8) {
            const uint64_t *u = (const uint64_t *)p;
            npy_intp i = 0;
            for (; i + 256 <= n; i += 256) { /* blocks: stop early on a hit, vectorised within */
                for (int k = 0; k < 256; k++) acc |= (u[i + k] & E) + C;
                if (acc >> 63) return 1;
            }
            for (; i < n; i++) acc |= (u[i] & E) + C;
        }
        else {
            for (npy_intp i = 0; i < n; i++) {
                uint64_t v;
                memcpy(&v, p + i * stride, 8);
                acc |= (v & E) + C;
            }
        }
        return (int)(acc >> 63);
    }
    else {
        const uint32_t E = EXP32, C = CARRY32(t);
        uint32_t acc = 0;
        if (stride == 4) {
            const uint32_t *u = (const uint32_t *)p;
            npy_intp i = 0;
            for (; i + 512 <= n; i += 512) {
                for (int k = 0; k < 512; k++) acc |= (u[i + k] & E) + C;
                if (acc >> 31) return 1;
            }
            for (; i < n; i++) acc |= (u[i] & E) + C;
        }
        else {
            for (npy_intp i = 0; i < n; i++) {
                uint32_t v;
                memcpy(&v, p + i * stride, 4);
                acc |= (v & E) + C;
            }
        }
        return (int)(acc >> 31);
    }
}

/* Whether any of n elements (cplx: pairs of reals) at p, `stride` bytes apart, has a real part or an
 * imaginary part with a biased exponent of at least t. */
static int
scan_elements(const char *p, npy_intp n, npy_intp stride, int size, int cplx, int t)
{
    if (!cplx) return scan_reals(p, n, stride, size, t);
    if (stride == 2 * size) return scan_reals(p, 2 * n, size, size, t);
    return scan_reals(p, n, stride, size, t) || scan_reals(p + size, n, stride, size, t);
}

/* scan_elements of two runs of n reals each, read side by side (both streams from memory at once). */
WIDEST static int
scan_pair(const char *p, npy_intp sp, const char *q, npy_intp sq, npy_intp n, int size, int cplx, int t)
{
    if (cplx) {
        if (sp != 2 * size || sq != 2 * size)
            return scan_elements(p, n, sp, size, 1, t) || scan_elements(q, n, sq, size, 1, t);
        n *= 2;
        sp = sq = size;
    }
    if (sp != size || sq != size)
        return scan_reals(p, n, sp, size, t) || scan_reals(q, n, sq, size, t);
    if (size == 8) {
        const uint64_t E = EXP64, C = CARRY64(t), *u = (const uint64_t *)p, *v = (const uint64_t *)q;
        uint64_t acc = 0;
        for (npy_intp i = 0; i < n; i++) acc |= ((u[i] & E) + C) | ((v[i] & E) + C);
        return (int)(acc >> 63);
    }
    else {
        const uint32_t E = EXP32, C = CARRY32(t), *u = (const uint32_t *)p, *v = (const uint32_t *)q;
        uint32_t acc = 0;
        for (npy_intp i = 0; i < n; i++) acc |= ((u[i] & E) + C) | ((v[i] & E) + C);
        return (int)(acc >> 31);
    }
}

/* Run parts 0..nparts-1 of `part` (elsize bytes each, from `parts`): on the pool's slot where there are
 * several and a pool, else on this thread one after the other; counted among the pool's calls in flight
 * (fork() and the exit wait for them).  Called without the GIL. */
static void
run_here(int slot, pool_job_fn part, int nparts, size_t elsize, void *parts)
{
    if (pool_api != NULL) pool_api->enter();
    if (nparts > 1 && slot >= 0 && pool_api != NULL) RUN_PARTS(slot, part, nparts, elsize, parts);
    else
        for (int p = 0; p < nparts; p++) part(p, (char *)parts + (size_t)p * elsize, 0);
    if (pool_api != NULL) pool_api->leave();
}

/* The columns [bounds[p], bounds[p + 1]) of part p of nparts of the triangle of order n, about equal
 * areas (column j has j + 1 rows (upper) or n - j (lower)), contiguous and in order. */
static void
tri_bounds(npy_intp n, int lower, int nparts, npy_intp *bounds)
{
    bounds[0] = 0;
    for (int p = 1; p < nparts; p++) {
        double f = (double)p / nparts;
        npy_intp c = (npy_intp)(n * sqrt(lower ? 1.0 - f : f));
        if (lower) c = n - c;
        bounds[p] = c < bounds[p - 1] ? bounds[p - 1] : c > n ? n : c;
    }
    bounds[nparts] = n;
}

/* One part of a whole-array scan: rows [lo, hi) of the outer dimension. */
typedef struct {
    const char *base;
    npy_intp lo, hi, outer_stride, inner_n, inner_stride;
    int size, cplx, hit, t;
} ScanPart;

static void
scan_part(int index, void *data, int arg)
{
    ScanPart *s = (ScanPart *)data;
    (void)index, (void)arg;
    for (npy_intp i = s->lo; i < s->hi && !s->hit; i++)
        s->hit = scan_elements(s->base + i * s->outer_stride, s->inner_n, s->inner_stride, s->size, s->cplx, s->t);
}

/* The element sizes of an array's dtype: 0 where it is not float32/64 or complex64/128 in native order. */
static int
real_size(PyArrayObject *a, int *cplx)
{
    int t = PyArray_TYPE(a);
    if (!PyArray_ISNOTSWAPPED(a) || !PyArray_ISALIGNED(a)) return 0;
    *cplx = (t == NPY_CFLOAT || t == NPY_CDOUBLE);
    if (t == NPY_FLOAT || t == NPY_CFLOAT) return 4;
    if (t == NPY_DOUBLE || t == NPY_CDOUBLE) return 8;
    return 0;
}

/* The drop-in's OpenBLAS instance, as configure() gave it: its pool slot (-1: none) and its thread setting. */
static int drop_in_slot = -1;
static int (*drop_in_threads)(void) = NULL;

static PyObject *
guard_nonfinite(PyObject *self, PyObject *args)
{
    PyArrayObject *a;
    int slot = drop_in_slot, threads = 1, size, cplx = 0, nd, level = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!|i:nonfinite", &PyArray_Type, &a, &level)) return NULL;
    size = real_size(a, &cplx);
    nd = PyArray_NDIM(a);
    if (size == 0 || nd > 2 || level < 0 || level > 2) Py_RETURN_NONE; /* not one it scans: the caller asks NumPy */
    npy_intp es = (npy_intp)size * (cplx ? 2 : 1), n = PyArray_SIZE(a);
    if (n == 0) Py_RETURN_FALSE;
    int t = size == 8 ? (level == 0 ? NONFINITE64 : level == 1 ? SAFE_BIG64 : SAFE_VEC64)
                      : (level == 0 ? NONFINITE32 : level == 1 ? SAFE_BIG32 : SAFE_VEC32);
    ScanPart whole = {PyArray_BYTES(a), 0, 1, 0, n, es, size, cplx, 0, t};
    if (PyArray_IS_C_CONTIGUOUS(a) || PyArray_IS_F_CONTIGUOUS(a)) {
        /* one run of n elements, cut into rows of at most 64 KiB for the parts */
        npy_intp row = CHUNK_BYTES / es;
        whole.inner_n = row < n ? row : n;
        whole.hi = (n + whole.inner_n - 1) / whole.inner_n;
        whole.outer_stride = whole.inner_n * es;
    }
    else if (nd == 1) {
        whole.inner_stride = PyArray_STRIDE(a, 0);
    }
    else { /* 2-D strided: the inner loop along the smaller stride */
        int in = (PyArray_STRIDE(a, 0) < 0 ? -PyArray_STRIDE(a, 0) : PyArray_STRIDE(a, 0))
                 <= (PyArray_STRIDE(a, 1) < 0 ? -PyArray_STRIDE(a, 1) : PyArray_STRIDE(a, 1)) ? 0 : 1;
        whole.inner_n = PyArray_DIM(a, in);
        whole.inner_stride = PyArray_STRIDE(a, in);
        whole.hi = PyArray_DIM(a, 1 - in);
        whole.outer_stride = PyArray_STRIDE(a, 1 - in);
    }
    npy_intp rows = whole.hi, last = (n - (rows - 1) * whole.inner_n); /* contiguous: the last row is short */
    int contiguous = PyArray_IS_C_CONTIGUOUS(a) || PyArray_IS_F_CONTIGUOUS(a);
    int nparts = 1;
    if (n * es >= PARALLEL_BYTES && slot >= 0 && pool_api != NULL && drop_in_threads != NULL && rows > 1)
        threads = drop_in_threads();
    if (threads > 1)
        nparts = (int)(rows < threads ? rows : threads);
    ScanPart parts[MAX_PARTS];
    if (nparts > MAX_PARTS) nparts = MAX_PARTS;
    for (int p = 0; p < nparts; p++) {
        parts[p] = whole;
        parts[p].lo = rows * p / nparts;
        parts[p].hi = rows * (p + 1) / nparts;
    }
    int hit = 0;
    Py_BEGIN_ALLOW_THREADS
    if (contiguous) { /* the short last row apart */
        for (int p = 0; p < nparts; p++)
            if (parts[p].hi == rows) parts[p].hi = rows - 1;
        hit = scan_elements(whole.base + (rows - 1) * whole.outer_stride, last, es, size, cplx, t);
    }
    if (!hit) {
        if (nparts > 1) RUN_PARTS(slot, scan_part, nparts, sizeof(ScanPart), parts);
        else scan_part(0, parts, 0);
        for (int p = 0; p < nparts; p++) hit |= parts[p].hit;
    }
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(hit);
}

/* Part of a triangle's scan: columns [lo, hi) of an n x n Fortran-ordered matrix, rows 0..j (upper) or
 * j..n-1 (lower) of column j. */
typedef struct {
    const char *base;
    npy_intp n, lo, hi, ld;
    int lower, size, cplx, t, hit;
} TriPart;

static void
tri_part(int index, void *data, int arg)
{
    TriPart *s = (TriPart *)data;
    npy_intp es = (npy_intp)s->size * (s->cplx ? 2 : 1);
    (void)index, (void)arg;
    for (npy_intp j = s->lo; j < s->hi && !s->hit; j++) {
        npy_intp r0 = s->lower ? j : 0, r1 = s->lower ? s->n : j + 1;
        s->hit = scan_elements(s->base + (j * s->ld + r0) * es, r1 - r0, es, s->size, s->cplx, s->t);
    }
}

/* triangle(a, lower, level=0) -> bool or None: nonfinite() of the triangle of the square Fortran-ordered a
 * that a symmetric or Hermitian rank update reads and writes (None: not such an array). */
static PyObject *
guard_triangle(PyObject *self, PyObject *args)
{
    PyArrayObject *a;
    int lower, level = 0, size, cplx = 0, threads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!p|i:triangle", &PyArray_Type, &a, &lower, &level)) return NULL;
    size = real_size(a, &cplx);
    if (size == 0 || PyArray_NDIM(a) != 2 || PyArray_DIM(a, 0) != PyArray_DIM(a, 1) || !PyArray_IS_F_CONTIGUOUS(a)
        || level < 0 || level > 2)
        Py_RETURN_NONE;
    npy_intp n = PyArray_DIM(a, 0), es = (npy_intp)size * (cplx ? 2 : 1);
    if (n == 0) Py_RETURN_FALSE;
    int t = size == 8 ? (level == 0 ? NONFINITE64 : level == 1 ? SAFE_BIG64 : SAFE_VEC64)
                      : (level == 0 ? NONFINITE32 : level == 1 ? SAFE_BIG32 : SAFE_VEC32);
    if (n * n * es / 2 >= PARALLEL_BYTES && drop_in_slot >= 0 && pool_api != NULL && drop_in_threads != NULL)
        threads = drop_in_threads();
    int nparts = threads > 1 ? (threads < MAX_PARTS ? threads : MAX_PARTS) : 1;
    TriPart parts[MAX_PARTS];
    npy_intp bounds[MAX_PARTS + 1];
    tri_bounds(n, lower, nparts, bounds);
    for (int p = 0; p < nparts; p++)
        parts[p] = (TriPart){PyArray_BYTES(a), n, bounds[p], bounds[p + 1], n, lower, size, cplx, t, 0};
    int hit = 0;
    Py_BEGIN_ALLOW_THREADS
    run_here(drop_in_slot, tri_part, nparts, sizeof(TriPart), parts);
    Py_END_ALLOW_THREADS
    for (int p = 0; p < nparts; p++) hit |= parts[p].hit;
    return PyBool_FromLong(hit);
}

/* ------------------------------------------------------------------------------------------ guarded */

enum { K_AXPY, K_SCAL, K_ROT, K_ROTM, K_GER, NKINDS };
static const char *const KIND[NKINDS] = {"axpy", "scal", "rot", "rotm", "ger"};

typedef void (*axpy_t)(const int *, const void *, const void *, const int *, void *, const int *);
typedef void (*scal_t)(const int *, const void *, void *, const int *);
typedef void (*rot_t)(const int *, void *, const int *, void *, const int *, const void *, const void *);
typedef void (*rotm_t)(const int *, void *, const int *, void *, const int *, const void *);
typedef void (*ger_t)(const int *, const int *, const void *, const void *, const int *, const void *,
                      const int *, void *, const int *);

/* The fingerprint of an array the call covers whole (tileblas.rblas._fingerprint.fingerprint: its elements
 * at 0, step, 2 step, ... and its last, in memory order), gathered while the chunks are in cache. */
#define PRINT_SAMPLES 64
typedef struct {
    const char *base;                /* the array's first element (NULL: not gathered) */
    npy_intp size, step, nsamples;   /* elements; every step-th one is a sample, then the last */
    char buf[(2 * PRINT_SAMPLES + 1) * 16];
} Print;

/* Set up the print of an array of `size` elements of `es` bytes from `base` (size <= 0: none). */
static void
print_init(Print *pr, const char *base, npy_intp size, size_t es)
{
    pr->base = size > 0 ? base : NULL;
    pr->size = size;
    pr->step = size / PRINT_SAMPLES > 1 ? size / PRINT_SAMPLES : 1;
    pr->nsamples = (size + pr->step - 1) / pr->step;
    if ((size_t)(pr->nsamples + 1) * es > sizeof pr->buf) pr->base = NULL; /* sizes 64-127: Python's own */
}

/* Copy the samples among the elements [lo, lo + count) (memory order) of the array into its print. */
static void
print_gather(Print *pr, npy_intp lo, npy_intp count, size_t es)
{
    if (pr->base == NULL) return;
    npy_intp t = ((lo + pr->step - 1) / pr->step) * pr->step;
    for (; t < lo + count; t += pr->step)
        memcpy(pr->buf + (size_t)(t / pr->step) * es, pr->base + (size_t)t * es, es);
    if (lo <= pr->size - 1 && pr->size - 1 < lo + count)
        memcpy(pr->buf + (size_t)pr->nsamples * es, pr->base + (size_t)(pr->size - 1) * es, es);
}

/* A scalar of the routine: float or double, real or complex (the BLAS routines take it by pointer). */
typedef union {
    float f[2];
    double d[2];
} scalar_u;

/* ------------------------------------------------------------------------------- axpy in one pass
 *
 * Where the routine is axpy at unit strides and the kernel of tileblas' OpenBLAS rounds a*x + y once (a
 * fused multiply-add: its vector loop and its tail loop, checked against it at configure(); other CPUs and
 * kernels take the chunks of BLAS calls), each chunk is done in one pass over x and y: y's value is kept
 * aside in a buffer that stays in L1, the result stored, and the result's exponent checked.  The plain call
 * reads x and y and writes y once; this does the same, so it costs what the plain call costs. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define HAVE_FUSED 1

__attribute__((target("avx2,fma"))) static int
fused_daxpy(npy_intp n, const void *alpha, const char *xp, char *yp, char *save)
{
    const double *x = (const double *)xp;
    double *y = (double *)yp, *s = (double *)save, a = *(const double *)alpha;
    const __m256d va = _mm256_set1_pd(a);
    const __m256i E = _mm256_set1_epi64x((long long)EXP64), C = _mm256_set1_epi64x((long long)CARRY64(NONFINITE64));
    __m256i acc = _mm256_setzero_si256();
    npy_intp i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256d vy = _mm256_loadu_pd(y + i);
        __m256d r = _mm256_fmadd_pd(va, _mm256_loadu_pd(x + i), vy);
        _mm256_storeu_pd(s + i, vy);
        _mm256_storeu_pd(y + i, r);
        acc = _mm256_or_si256(acc, _mm256_add_epi64(_mm256_and_si256(_mm256_castpd_si256(r), E), C));
    }
    uint64_t tail = 0;
    for (; i < n; i++) {
        double r = __builtin_fma(a, x[i], y[i]);
        uint64_t u;
        s[i] = y[i];
        y[i] = r;
        memcpy(&u, &r, 8);
        tail |= (u & EXP64) + CARRY64(NONFINITE64);
    }
    return _mm256_movemask_pd(_mm256_castsi256_pd(acc)) != 0 || (tail >> 63) != 0;
}

__attribute__((target("avx2,fma"))) static int
fused_saxpy(npy_intp n, const void *alpha, const char *xp, char *yp, char *save)
{
    const float *x = (const float *)xp;
    float *y = (float *)yp, *s = (float *)save, a = *(const float *)alpha;
    const __m256 va = _mm256_set1_ps(a);
    const __m256i E = _mm256_set1_epi32((int)EXP32), C = _mm256_set1_epi32((int)CARRY32(NONFINITE32));
    __m256i acc = _mm256_setzero_si256();
    npy_intp i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 vy = _mm256_loadu_ps(y + i);
        __m256 r = _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), vy);
        _mm256_storeu_ps(s + i, vy);
        _mm256_storeu_ps(y + i, r);
        acc = _mm256_or_si256(acc, _mm256_add_epi32(_mm256_and_si256(_mm256_castps_si256(r), E), C));
    }
    uint32_t tail = 0;
    for (; i < n; i++) {
        float r = __builtin_fmaf(a, x[i], y[i]);
        uint32_t u;
        s[i] = y[i];
        y[i] = r;
        memcpy(&u, &r, 4);
        tail |= (u & EXP32) + CARRY32(NONFINITE32);
    }
    return _mm256_movemask_ps(_mm256_castsi256_ps(acc)) != 0 || (tail >> 31) != 0;
}
#else
#define HAVE_FUSED 0
#endif

/* fused_daxpy / fused_saxpy where configure() found them giving the BLAS kernel's bits, else NULL. */
static int (*fused_of[2])(npy_intp, const void *, const char *, char *, char *) = {NULL, NULL};

/* One guarded call.  Level 1: n elements of x (at incx) and y (at incy), reference BLAS's order (element
 * i of a vector at a negative increment is the one (n - 1 - i) * |inc| from its first).  ger: n columns of
 * the m x n matrix a (leading dimension m), x of m elements, y of n. */
typedef struct {
    int kind, size, cplx, nout;
    size_t es;                       /* bytes per element */
    void *fn;
    int n, m, incx, incy, chunk;
    char *x, *y, *a;
    const void *s1, *s2;             /* a / alpha; c and s of rot; param of rotm */
    int careful;                     /* every chunk copied and read after (the scalars are large) */
    Print *px, *py, *pa;             /* the prints gathered of x, y (where the call covers them) and a */
    int (*fused)(npy_intp, const void *, const char *, char *, char *); /* axpy in one pass (NULL: BLAS) */
    int t_big, t_vec;                /* exponent thresholds: operands, ger's vectors (SAFE_*) */
} Job;



/* A chunk whose outputs hold a non-finite value after the call: the copy of its outputs from before. */
typedef struct {
    int first, count;                /* its elements (ger: columns) */
    char *copy;
} Kept;

/* What a part kept: its copies, and whether one could not be made or kept (out of memory). */
typedef struct {
    Kept *kept;
    int nkept, cap;
    int lost;
} Keeps;

/* Keep `copy` (the outputs of the count elements or rows from first, before the call); 0 where it cannot
 * (out of memory: the caller still owns the copy). */
static int
keep(Keeps *p, int first, int count, char *copy)
{
    if (p->nkept == p->cap) {
        int cap = p->cap ? 2 * p->cap : 8;
        Kept *kept = p->cap > INT32_MAX / 4 ? NULL : realloc(p->kept, (size_t)cap * sizeof(Kept));
        if (kept == NULL) return 0;
        p->kept = kept;
        p->cap = cap;
    }
    p->kept[p->nkept].first = first;
    p->kept[p->nkept].count = count;
    p->kept[p->nkept].copy = copy;
    p->nkept++;
    return 1;
}

/* The copies the nparts parts kept (each part elsize bytes, its Keeps at `offset` in it), as the list
 * [(first, count, values before)] (`unit` bytes per unit of count), all of them freed; *lost: whether a
 * part lost one.  NULL with an exception set (the copies freed all the same). */
static PyObject *
kept_list(char *parts, int nparts, size_t elsize, size_t offset, size_t unit, int *lost)
{
    PyObject *out = PyList_New(0);
    int failed = out == NULL;
    *lost = 0;
    for (int p = 0; p < nparts; p++) {
        Keeps *q = (Keeps *)(parts + (size_t)p * elsize + offset);
        *lost |= q->lost;
        for (int i = 0; i < q->nkept; i++) {
            Kept *k = &q->kept[i];
            if (!failed) {
                PyObject *item = Py_BuildValue("iiy#", k->first, k->count, k->copy, (Py_ssize_t)(k->count * unit));
                if (item == NULL || PyList_Append(out, item) < 0) failed = 1;
                Py_XDECREF(item);
            }
            free(k->copy);
        }
        free(q->kept);
        q->kept = NULL, q->nkept = q->cap = 0;
    }
    if (failed) Py_CLEAR(out);
    return out;
}

typedef struct {
    const Job *job;
    int e0, e1;                      /* elements (ger: columns) [e0, e1), in chunks from e0 */
    Keeps keeps;
} Part;

/* The first element (in memory order) of the elements [i0, i0 + k) of an n-vector at increment inc. */
static inline npy_intp
first_of(int n, int i0, int k, int inc)
{
    return inc > 0 ? (npy_intp)i0 * inc : (npy_intp)(n - i0 - k) * (-inc);
}

/* The output regions of the chunk of k elements (ger: columns) from i0: pointers, element counts, strides
 * in bytes; returns how many. */
static int
regions(const Job *j, int i0, int k, char **p, npy_intp *cnt, npy_intp *stride)
{
    switch (j->kind) {
    case K_GER:
        p[0] = j->a + (size_t)i0 * j->m * j->es;
        cnt[0] = (npy_intp)k * j->m;
        stride[0] = (npy_intp)j->es;
        return 1;
    case K_AXPY:
        p[0] = j->y + first_of(j->n, i0, k, j->incy) * (npy_intp)j->es;
        cnt[0] = k;
        stride[0] = (npy_intp)(j->incy < 0 ? -j->incy : j->incy) * (npy_intp)j->es;
        return 1;
    case K_SCAL:
        p[0] = j->x + first_of(j->n, i0, k, j->incx) * (npy_intp)j->es;
        cnt[0] = k;
        stride[0] = (npy_intp)(j->incx < 0 ? -j->incx : j->incx) * (npy_intp)j->es;
        return 1;
    default: /* rot, rotm: x and y */
        p[0] = j->x + first_of(j->n, i0, k, j->incx) * (npy_intp)j->es;
        p[1] = j->y + first_of(j->n, i0, k, j->incy) * (npy_intp)j->es;
        cnt[0] = cnt[1] = k;
        stride[0] = (npy_intp)(j->incx < 0 ? -j->incx : j->incx) * (npy_intp)j->es;
        stride[1] = (npy_intp)(j->incy < 0 ? -j->incy : j->incy) * (npy_intp)j->es;
        return 2;
    }
}

static void
gather(char *dst, const char *src, npy_intp n, npy_intp stride, size_t es)
{
    if ((size_t)stride == es) {
        memcpy(dst, src, (size_t)n * es);
        return;
    }
    for (npy_intp i = 0; i < n; i++) memcpy(dst + (size_t)i * es, src + i * stride, es);
}

/* The BLAS call on the chunk of k elements (ger: columns) from i0. */
static void
compute(const Job *j, int i0, int k)
{
    char *x = j->x, *y = j->y;
    if (j->kind != K_GER) x += first_of(j->n, i0, k, j->incx) * (npy_intp)j->es;
    if (j->kind != K_SCAL) y += first_of(j->n, i0, k, j->incy) * (npy_intp)j->es;
    switch (j->kind) {
    case K_AXPY:
        ((axpy_t)j->fn)(&k, j->s1, x, &j->incx, y, &j->incy);
        break;
    case K_SCAL:
        ((scal_t)j->fn)(&k, j->s1, x, &j->incx);
        break;
    case K_ROT:
        ((rot_t)j->fn)(&k, x, &j->incx, y, &j->incy, j->s1, j->s2);
        break;
    case K_ROTM:
        ((rotm_t)j->fn)(&k, x, &j->incx, y, &j->incy, j->s1);
        break;
    default: /* ger: columns [i0, i0 + k) of a, the matching part of y, all of x */
        ((ger_t)j->fn)(&j->m, &k, j->s1, j->x, &j->incx, y, &j->incy, j->a + (size_t)i0 * j->m * j->es,
                       &j->m);
        break;
    }
}

static size_t
chunk_copy_bytes(const Job *j)
{
    size_t per = j->kind == K_GER ? (size_t)j->chunk * j->m : (size_t)j->chunk;
    return per * j->es * (size_t)j->nout;
}

/* Whether chunk c's operands (what regions() gives, and axpy's x, ger's part of y) may make a non-finite
 * value: one of them is Inf, NaN or large (t_big, t_vec).  Read side by side: this is what brings the
 * chunk into cache for its BLAS call. */
static int
risky(const Job *j, int i0, int k, char **ptr, npy_intp *cnt, npy_intp *stride)
{
    npy_intp ax = (npy_intp)(j->incx < 0 ? -j->incx : j->incx) * (npy_intp)j->es;
    npy_intp ay = (npy_intp)(j->incy < 0 ? -j->incy : j->incy) * (npy_intp)j->es;
    switch (j->kind) {
    case K_AXPY: /* x and y */
        return scan_pair(j->x + first_of(j->n, i0, k, j->incx) * (npy_intp)j->es, ax, ptr[0], stride[0], k,
                         j->size, j->cplx, j->t_big);
    case K_SCAL:
        return scan_elements(ptr[0], cnt[0], stride[0], j->size, j->cplx, j->t_big);
    case K_GER: /* the columns of a, the part of y */
        return scan_elements(j->y + first_of(j->n, i0, k, j->incy) * (npy_intp)j->es, k, ay, j->size, j->cplx,
                             j->t_vec)
               || scan_elements(ptr[0], cnt[0], stride[0], j->size, j->cplx, j->t_big);
    default: /* rot, rotm */
        return scan_pair(ptr[0], stride[0], ptr[1], stride[1], k, j->size, j->cplx, j->t_big);
    }
}

/* The samples of the prints among the chunk of k elements (ger: columns) from i0, after its call. */
static void
gather_prints(const Job *j, int i0, int k)
{
    if (j->kind == K_GER) {
        if (j->pa->base != NULL) print_gather(j->pa, (npy_intp)i0 * j->m, (npy_intp)k * j->m, j->es);
        return;
    }
    if (j->px->base != NULL) print_gather(j->px, first_of(j->n, i0, k, j->incx), k, j->es);
    if (j->py->base != NULL) print_gather(j->py, first_of(j->n, i0, k, j->incy), k, j->es);
}

/* The chunks of elements [e0, e1): each one whose operands are all finite and not large is computed at once (its
 * outputs cannot become non-finite); any other is copied first, computed, read again, and its copy kept
 * where an output holds a non-finite value. */
static void
run_part(int index, void *data, int arg)
{
    Part *p = (Part *)data;
    const Job *j = p->job;
    size_t bytes = chunk_copy_bytes(j);
    char *copy = NULL;
    (void)index, (void)arg;
    for (int i0 = p->e0; i0 < p->e1; i0 += j->chunk) {
        char *ptr[2];
        npy_intp cnt[2], stride[2];
        int k = p->e1 - i0 < j->chunk ? p->e1 - i0 : j->chunk;
        int nr = regions(j, i0, k, ptr, cnt, stride), bad = 0;
        size_t off = 0;
        if (j->fused != NULL) { /* one pass: y kept aside in `copy` as it is overwritten */
            if (copy == NULL && (copy = malloc(bytes)) == NULL) {
                p->keeps.lost = 1; /* cannot keep anything: compute and count on the check */
                compute(j, i0, k);
                gather_prints(j, i0, k);
                continue;
            }
            int hit = j->fused(k, j->s1, j->x + first_of(j->n, i0, k, j->incx) * (npy_intp)j->es, ptr[0], copy);
            gather_prints(j, i0, k);
            if (hit) {
                if (!keep(&p->keeps, i0, k, copy)) p->keeps.lost = 1;
                else copy = NULL;
            }
            continue;
        }
        if (!j->careful && !risky(j, i0, k, ptr, cnt, stride)) {
            compute(j, i0, k);
            gather_prints(j, i0, k);
            continue;
        }
        if (copy == NULL) copy = malloc(bytes);
        if (copy != NULL)
            for (int r = 0; r < nr; r++) {
                gather(copy + off, ptr[r], cnt[r], stride[r], j->es);
                off += (size_t)cnt[r] * j->es;
            }
        compute(j, i0, k);
        gather_prints(j, i0, k);
        for (int r = 0; r < nr && !bad; r++)
            bad = scan_elements(ptr[r], cnt[r], stride[r], j->size, j->cplx, j->size == 8 ? NONFINITE64 : NONFINITE32);
        if (!bad) continue;
        if (copy == NULL || !keep(&p->keeps, i0, k, copy)) {
            p->keeps.lost = 1;
            continue;
        }
        copy = NULL;
    }
    free(copy);
}


/* Whether the one-pass kernel of precision `dbl` gives the bits of the BLAS axpy at `blas` (the one-thread
 * instance: the kernel every part of the drop-in's calls runs) on lengths that take its vector loop and its
 * tail loop, with values of every magnitude. */
static int
fused_matches(int dbl, void *blas)
{
#if HAVE_FUSED
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || blas == NULL) return 0;
    enum { N = 1200 };
    static const int lengths[] = {1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 33, 63, 64, 65, 100, 257, 1031, N};
    size_t es = dbl ? 8 : 4;
    char *x = malloc(N * es), *y = malloc(N * es), *y2 = malloc(N * es), *save = malloc(N * es);
    int ok = x != NULL && y != NULL && y2 != NULL && save != NULL;
    uint64_t r = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; ok && i < N; i++) {
        double v[2];
        for (int q = 0; q < 2; q++) { /* xorshift: values with full mantissas, exponents -40 .. 40 */
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            v[q] = ldexp((double)(r >> 11) / 9007199254740992.0 - 0.5, (int)(r % 81) - 40);
        }
        if (dbl) ((double *)x)[i] = v[0], ((double *)y)[i] = v[1];
        else ((float *)x)[i] = (float)v[0], ((float *)y)[i] = (float)v[1];
    }
    double ad = 0.7071067811865476;
    float af = 0.70710677f;
    const void *alpha = dbl ? (const void *)&ad : (const void *)&af;
    for (size_t t = 0; ok && t < sizeof lengths / sizeof lengths[0]; t++) {
        int n = lengths[t], one = 1;
        memcpy(y2, y, (size_t)n * es);
        ((axpy_t)blas)(&n, alpha, x, &one, y2, &one);
        char *y3 = malloc((size_t)n * es);
        if (y3 == NULL) {
            ok = 0;
            break;
        }
        memcpy(y3, y, (size_t)n * es);
        (dbl ? fused_daxpy : fused_saxpy)(n, alpha, x, y3, save);
        ok = memcmp(y2, y3, (size_t)n * es) == 0 && memcmp(save, y, (size_t)n * es) == 0;
        free(y3);
    }
    free(x), free(y), free(y2), free(save);
    return ok;
#else
    (void)dbl, (void)blas;
    return 0;
#endif
}

static PyObject *
guard_configure(PyObject *self, PyObject *args)
{
    int slot;
    unsigned long long get_threads, saxpy = 0, daxpy = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "iK|KK:configure", &slot, &get_threads, &saxpy, &daxpy)) return NULL;
    drop_in_slot = slot;
    drop_in_threads = (int (*)(void))(uintptr_t)get_threads;
#if HAVE_FUSED
    fused_of[0] = fused_matches(0, (void *)(uintptr_t)saxpy) ? fused_saxpy : NULL;
    fused_of[1] = fused_matches(1, (void *)(uintptr_t)daxpy) ? fused_daxpy : NULL;
#endif
    return Py_BuildValue("(OO)", fused_of[0] != NULL ? Py_True : Py_False, fused_of[1] != NULL ? Py_True : Py_False);
}

/* A vector the executor reads (write: and writes) in place: 1-D, of type typenum, contiguous, aligned, in
 * native byte order; NULL otherwise. */
static PyArrayObject *
vector(PyObject *o, int typenum, int write)
{
    PyArrayObject *v;
    if (!PyArray_Check(o)) return NULL;
    v = (PyArrayObject *)o;
    if (PyArray_NDIM(v) != 1 || PyArray_TYPE(v) != typenum || !PyArray_ISNOTSWAPPED(v) || !PyArray_ISALIGNED(v)
        || !PyArray_IS_C_CONTIGUOUS(v) || (write && !PyArray_ISWRITEABLE(v)) || PyArray_DIM(v, 0) > INT32_MAX)
        return NULL;
    return v;
}

/* Whether n elements from element off at increment inc lie in the vector v (scipy's rule: off < len(v) and
 * len(v) - off > (n - 1) * |inc|), with every index a BLAS integer. */
static int
spans(PyArrayObject *v, Py_ssize_t off, int n, int inc)
{
    npy_intp len = PyArray_DIM(v, 0);
    long long reach = (long long)(n - 1) * (inc < 0 ? -(long long)inc : inc);
    return inc != 0 && off >= 0 && off < len && len - off > reach && reach < INT32_MAX;
}

/* [first, last) bytes of an array's elements. */
static void
extent(PyArrayObject *v, char **lo, char **hi)
{
    *lo = PyArray_BYTES(v);
    *hi = *lo + PyArray_NBYTES(v);
}

static int
overlap(PyArrayObject *u, PyArrayObject *v)
{
    char *a0, *a1, *b0, *b1;
    extent(u, &a0, &a1);
    extent(v, &b0, &b1);
    return a0 < b1 && b0 < a1;
}

/* A scalar as the routine takes it, of precision `size` (4, 8) and complex or real; 0 where it is not a
 * finite number of that kind (then the caller declines).  *large: its magnitude is 2**20 or more. */
static int
scalar(PyObject *o, int size, int cplx, scalar_u *out, int *large)
{
    double re, im = 0.0;
    if (PyComplex_Check(o)) {
        if (!cplx) return 0;
        re = PyComplex_RealAsDouble(o);
        im = PyComplex_ImagAsDouble(o);
    }
    else if (PyFloat_Check(o) || PyLong_Check(o) || PyArray_IsScalar(o, Floating) || PyArray_IsScalar(o, Integer)) {
        if (PyBool_Check(o) || PyArray_IsScalar(o, Bool)) return 0;
        re = PyFloat_AsDouble(o);
        if (re == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
    }
    else if (cplx && PyArray_IsScalar(o, ComplexFloating)) {
        Py_complex c = PyComplex_AsCComplex(o);
        if (c.real == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        re = c.real;
        im = c.imag;
    }
    else
        return 0;
    double big = size == 4 ? 3.4028234663852886e38 : 1.7976931348623157e308;
    if (!(fabs(re) <= big && fabs(im) <= big)) return 0; /* NaN, Inf, or out of range of single precision */
    *large |= fabs(re) >= 1048576.0 || fabs(im) >= 1048576.0;
    if (size == 4) {
        out->f[0] = (float)re;
        out->f[1] = (float)im;
    }
    else {
        out->d[0] = re;
        out->d[1] = im;
    }
    return 1;
}

/*
 * guarded(kind, fn, typenum, n, x, offx, incx, y, offy, incy, s1, s2, a, m, real_scalars)
 *     -> (kept, lost, (print of x, print of y, print of a)) or None
 *
 * kind 'axpy', 'scal', 'rot', 'rotm' or 'ger'; fn the address of the routine in the one-thread instance;
 * typenum the NumPy type of its vectors; x and y the vectors (y None for scal), from element offx / offy
 * at incx / incy (BLAS's n elements); s1, s2 the scalars (a or alpha; c and s of rot; rotm's param, an
 * array of 5; s2 None but for rot), real numbers where real_scalars (rot, csscal/zdscal) else of the
 * routine's type; a ger's m x n matrix (None otherwise).  None, having done nothing, where an operand is
 * not one the executor takes (dtype, rank, layout, alignment, byte order, a read-only output, bounds,
 * overlapping vectors, a scalar that is not a finite number of its kind): the caller then makes the
 * call through tileblas.blas.  Else the chunks whose outputs hold a non-finite value after the call: a
 * list of (first, count, bytes) per chunk (Level 1: first logical element and count; ger: first column
 * and count), the bytes the chunk's outputs held before, output after output (x then y for rot/rotm),
 * each in memory order; lost: True where such a chunk's copy could not be kept (out of memory); and the
 * fingerprints (tileblas.rblas._fingerprint) after the call of x, y (where the call covers them whole) and
 * a, gathered from the chunks while in cache (None where not gathered).  Every chunk is read again after
 * its call where a scalar is 2**20 or more in magnitude.
 */
static PyObject *
guard_guarded(PyObject *self, PyObject *args)
{
    const char *kind;
    unsigned long long fn;
    int typenum, n, incx, incy, m, real_scalars, large = 0, cplx = 0;
    Py_ssize_t offx, offy;
    PyObject *x_o, *y_o, *s1_o, *s2_o, *a_o;
    PyArrayObject *x, *y = NULL, *a = NULL;
    scalar_u sc[2];
    Job j;
    (void)self;
    if (!PyArg_ParseTuple(args, "sKiiOniOniOOOip:guarded", &kind, &fn, &typenum, &n, &x_o, &offx, &incx, &y_o,
                          &offy, &incy, &s1_o, &s2_o, &a_o, &m, &real_scalars))
        return NULL;
    memset(&j, 0, sizeof j);
    memset(sc, 0, sizeof sc);
    for (j.kind = 0; j.kind < NKINDS && strcmp(KIND[j.kind], kind) != 0; j.kind++)
        ;
    if (j.kind == NKINDS || fn == 0) {
        PyErr_Format(PyExc_ValueError, "guarded: no routine %s at %llx", kind, fn);
        return NULL;
    }
    switch (typenum) {
    case NPY_FLOAT: j.size = 4; break;
    case NPY_DOUBLE: j.size = 8; break;
    case NPY_CFLOAT: j.size = 4; cplx = 1; break;
    case NPY_CDOUBLE: j.size = 8; cplx = 1; break;
    default: Py_RETURN_NONE;
    }
    int write_x = j.kind == K_SCAL || j.kind == K_ROT || j.kind == K_ROTM;
    if (n < 1 || (x = vector(x_o, typenum, write_x)) == NULL) Py_RETURN_NONE;
    if (j.kind != K_SCAL && (y = vector(y_o, typenum, j.kind != K_GER)) == NULL) Py_RETURN_NONE;
    if (j.kind == K_GER) {
        if (!PyArray_Check(a_o)) Py_RETURN_NONE;
        a = (PyArrayObject *)a_o;
        if (PyArray_NDIM(a) != 2 || PyArray_TYPE(a) != typenum || !PyArray_ISNOTSWAPPED(a) || !PyArray_ISALIGNED(a)
            || !PyArray_IS_F_CONTIGUOUS(a) || !PyArray_ISWRITEABLE(a) || PyArray_DIM(a, 0) != m
            || PyArray_DIM(a, 1) != n || PyArray_DIM(x, 0) != m || PyArray_DIM(y, 0) != n || m < 1 || offx != 0
            || offy != 0 || (incx != 1 && incx != -1) || (incy != 1 && incy != -1) || overlap(a, x) || overlap(a, y))
            Py_RETURN_NONE;
    }
    else {
        if (!spans(x, offx, n, incx) || (y != NULL && (!spans(y, offy, n, incy) || overlap(x, y))))
            Py_RETURN_NONE;
        if (j.kind == K_SCAL && incx < 0) Py_RETURN_NONE; /* BLAS scales nothing at a negative increment */
    }
    if (j.kind == K_ROTM) {
        PyArrayObject *p = vector(s1_o, typenum, 0);
        if (p == NULL || PyArray_DIM(p, 0) != 5) Py_RETURN_NONE;
        const char *pp = PyArray_BYTES(p);
        for (int i = 0; i < 5; i++) {
            double v = j.size == 4 ? (double)((const float *)pp)[i] : ((const double *)pp)[i];
            if (!isfinite(v)) Py_RETURN_NONE;
            if (i > 0 && fabs(v) >= 1048576.0) large = 1;
        }
        j.s1 = pp;
    }
    else {
        if (!scalar(s1_o, j.size, cplx && !real_scalars, &sc[0], &large)) Py_RETURN_NONE;
        if (j.kind == K_ROT && !scalar(s2_o, j.size, 0, &sc[1], &large)) Py_RETURN_NONE;
        j.s1 = &sc[0];
        j.s2 = &sc[1];
    }
    j.cplx = cplx;
    j.es = (size_t)j.size * (cplx ? 2 : 1);
    j.fn = (void *)(uintptr_t)fn;
    j.n = n;
    j.m = m;
    j.incx = incx;
    j.incy = incy;
    j.x = PyArray_BYTES(x) + (size_t)offx * j.es;
    if (y != NULL) j.y = PyArray_BYTES(y) + (size_t)offy * j.es;
    if (a != NULL) j.a = PyArray_BYTES(a);
    j.nout = (j.kind == K_ROT || j.kind == K_ROTM) ? 2 : 1;
    /* prints of the arrays the call covers whole (every element read or written, in chunks) */
    Print prints[3];
    memset(prints, 0, sizeof prints);
    j.px = &prints[0];
    j.py = &prints[1];
    j.pa = &prints[2];
    if (j.kind == K_GER)
        print_init(j.pa, j.a, (npy_intp)m * n, j.es);
    else {
        if (offx == 0 && (incx == 1 || incx == -1) && PyArray_DIM(x, 0) == n)
            print_init(j.px, j.x, n, j.es);
        if (y != NULL && offy == 0 && (incy == 1 || incy == -1) && PyArray_DIM(y, 0) == n)
            print_init(j.py, j.y, n, j.es);
    }
    j.t_big = j.size == 8 ? SAFE_BIG64 : SAFE_BIG32;
    j.t_vec = j.size == 8 ? SAFE_VEC64 : SAFE_VEC32;
    j.careful = large;
    int slot = drop_in_slot, threads = drop_in_threads != NULL ? drop_in_threads() : 1;
    if (j.kind == K_AXPY && !cplx && incx == 1 && incy == 1) j.fused = fused_of[j.size == 8];
    if (j.kind == K_GER && !large) /* x is read by every chunk: once, here */
        j.careful = scan_elements(j.x, m, (npy_intp)(incx < 0 ? -incx : incx) * (npy_intp)j.es, j.size, j.cplx,
                                  j.t_vec);
    size_t per_unit = j.es * (j.kind == K_GER ? (size_t)m : 1); /* output bytes per element or column */
    j.chunk = (int)(CHUNK_BYTES / (npy_intp)per_unit);
    if (j.chunk > 64) j.chunk &= ~63; /* whole blocks of the kernels' unrolled loops */
    if (j.chunk < 1) j.chunk = 1;

    /* The parts.  complex axpy: those OpenBLAS cuts the call into on the instance of the drop-in
     * (interface/zaxpy.c and blas_level1_thread: one part up to SPLIT_FROM elements, else `threads` parts,
     * each the ceiling of what is left over the threads left): each part's last elements go through its
     * kernel's tail loop, which does not round every complex product as the vector loop does, so the same
     * parts give the plain call's bits.  Every other kind computes an element the same way wherever it
     * falls (checked by the tests for every kind and precision): PARTS_PER_THREAD parts of whole chunks per
     * thread, claimed by whichever thread comes first, so a worker that wakes late costs the call only the
     * parts it would have run, from SPLIT_FROM elements (ger: PARALLEL_BYTES), where the plain call is
     * parallel too. */
    int nparts = 1, whole = !(j.kind == K_AXPY && cplx);
    int nchunks = (n + j.chunk - 1) / j.chunk;
    if (whole) {
        int big = j.kind == K_GER ? (npy_intp)((size_t)n * per_unit) >= PARALLEL_BYTES : n > SPLIT_FROM;
        if (big && threads > 1)
            nparts = threads * PARTS_PER_THREAD < nchunks ? threads * PARTS_PER_THREAD : nchunks;
    }
    else if (n > SPLIT_FROM && threads > 1)
        nparts = threads < n ? threads : n;
    if (nparts > MAX_PARTS) nparts = MAX_PARTS;
    Part parts[MAX_PARTS];
    memset(parts, 0, sizeof parts);
    for (int p = 0, left = n, e = 0; p < nparts; p++) {
        int width;
        if (whole) { /* whole chunks */
            int c0 = (int)((long long)nchunks * p / nparts), c1 = (int)((long long)nchunks * (p + 1) / nparts);
            width = (c1 < nchunks ? c1 * j.chunk : n) - c0 * j.chunk;
        }
        else
            width = (left + (nparts - p) - 1) / (nparts - p);
        parts[p].job = &j;
        parts[p].e0 = e;
        parts[p].e1 = e + width;
        e += width;
        left -= width;
    }
    Py_BEGIN_ALLOW_THREADS
    run_here(slot, run_part, nparts, sizeof(Part), parts);
    Py_END_ALLOW_THREADS

    int lost;
    PyObject *kept = kept_list((char *)parts, nparts, sizeof(Part), offsetof(Part, keeps), per_unit * (size_t)j.nout,
                               &lost);
    if (kept == NULL) return NULL;
    PyObject *pr[3];
    for (int i = 0; i < 3; i++) {
        if (prints[i].base == NULL)
            pr[i] = Py_NewRef(Py_None);
        else if ((pr[i] = PyBytes_FromStringAndSize(prints[i].buf,
                                                    (Py_ssize_t)((size_t)(prints[i].nsamples + 1) * j.es))) == NULL) {
            for (int q = 0; q < i; q++) Py_DECREF(pr[q]);
            Py_DECREF(kept);
            return NULL;
        }
    }
    return Py_BuildValue("(NO(NNN))", kept, lost ? Py_True : Py_False, pr[0], pr[1], pr[2]);
}

/* ------------------------------------------------------------------------------------- syr, in columns */

/* A real symmetric rank-1 update a += alpha x x^T (syr, full storage) is, column by column, what OpenBLAS
 * computes it as (driver/level2/syr_k.c, syr_thread.c, the small-n loop of interface/syr.c): for each j with
 * x[j] != 0, one axpy of the scalar alpha * x[j] (rounded in the routine's precision) over the column's
 * part of the triangle (upper: rows 0..j with x[0..j]; lower: rows j..n-1 with x[j..n-1]).  So these axpy
 * calls on the one-thread instance give the plain call's bits, whichever thread runs which column.  Each
 * column's part is read for Inf, NaN or a value of 2**1000 (single 2**100) or more just before its axpy, in
 * cache: one pass over the triangle, as the plain call makes.  A column with such a value is copied first
 * and its copy kept where the column holds a non-finite value after the axpy.  In full storage each
 * column's part is a stream of its own, which the scan would read from memory before the axpy ran: the
 * next column's part is fetched into the cache while this one's axpy runs (packed parts follow one another:
 * the processor's own prefetching streams them). */

/* A part of the columns of a symmetric or Hermitian rank update's triangle, and what it kept. */
typedef struct {
    char *a;                     /* full storage (n x n, Fortran order) or packed */
    npy_intp n, lo, hi;          /* columns [lo, hi) */
    int lower, packed, size, cplx, es, t;
    Keeps keeps;                 /* first: column, count: its rows, copy: its values before the call */
} Columns;

/* Column j's part of the triangle: its first element; *r0 its first row, *len its rows. */
static inline char *
column_at(const Columns *c, npy_intp j, npy_intp *r0, int *len)
{
    npy_intp lo = c->lower ? j : 0, hi = c->lower ? c->n : j + 1;
    npy_intp at = !c->packed ? j * c->n + lo : c->lower ? j * c->n - j * (j - 1) / 2 : j * (j + 1) / 2;
    *r0 = lo;
    *len = (int)(hi - lo);
    return c->a + at * c->es;
}

/* Before column j's terms (its part col, len rows): the next column's part fetched (full storage), this
 * one's scanned and copied where the scan flags it.  The copy, or NULL (none needed; or no memory: lost). */
static char *
column_begin(Columns *c, npy_intp j, const char *col, int len)
{
#if defined(__GNUC__)
    if (!c->packed && j + 1 < c->hi) {
        npy_intp r0;
        int next;
        const char *nx = column_at(c, j + 1, &r0, &next);
        for (size_t q = 0; q < (size_t)next * c->es; q += 64) __builtin_prefetch(nx + q, 0, 2);
    }
#endif
    if (!scan_elements(col, len, c->es, c->size, c->cplx, c->t)) return NULL;
    char *copy = (char *)malloc((size_t)len * c->es);
    if (copy == NULL) c->keeps.lost = 1;
    else memcpy(copy, col, (size_t)len * c->es);
    return copy;
}

/* After column j's terms: its copy kept where its part now holds an Inf or a NaN, else freed. */
static void
column_end(Columns *c, npy_intp j, const char *col, int len, char *copy)
{
    if (copy == NULL) return;
    if (!scan_elements(col, len, c->es, c->size, c->cplx, c->size == 8 ? NONFINITE64 : NONFINITE32)) {
        free(copy); /* no Inf or NaN after: the inverse restores it */
        return;
    }
    if (!keep(&c->keeps, (int)j, len, copy)) {
        free(copy);
        c->keeps.lost = 1;
    }
}

/* The parts of a rank update of order n (es bytes an element) whose plain call runs on `threads` threads:
 * PARTS_PER_THREAD per thread (claimed: a late worker leaves its share) where the triangle is large enough
 * to be parallel and there is a pool, else one. */
static int
column_parts(npy_intp n, int es, int threads)
{
    if (threads < 2 || (npy_intp)(n * n * es / 2) < PARALLEL_BYTES || drop_in_slot < 0 || pool_api == NULL)
        return 1;
    int nparts = threads * PARTS_PER_THREAD;
    if (nparts > MAX_PARTS) nparts = MAX_PARTS;
    return nparts > n ? (n > 0 ? (int)n : 1) : nparts;
}

/* The columns of nparts parts of a (columns first in each part of elsize bytes): about equal areas. */
static void
columns_split(char *parts, size_t elsize, int nparts, const Columns *whole)
{
    npy_intp bounds[MAX_PARTS + 1];
    tri_bounds(whole->n, whole->lower, nparts, bounds);
    for (int p = 0; p < nparts; p++) {
        Columns *c = (Columns *)(parts + (size_t)p * elsize);
        *c = *whole;
        c->lo = bounds[p], c->hi = bounds[p + 1];
    }
}

/* Run the parts (columns first in each), then (kept, lost) as syr() and rank() return it. */
static PyObject *
columns_run(pool_job_fn part, char *parts, size_t elsize, int nparts, size_t es)
{
    Py_BEGIN_ALLOW_THREADS
    run_here(drop_in_slot, part, nparts, elsize, parts);
    Py_END_ALLOW_THREADS
    int lost;
    PyObject *kept = kept_list(parts, nparts, elsize, offsetof(Columns, keeps), es, &lost);
    return kept == NULL ? NULL : Py_BuildValue("(NO)", kept, lost ? Py_True : Py_False);
}

typedef struct {
    Columns c;
    const char *x;
    double alpha;
    axpy_t fn;
} SyrPart;

static void
syr_part(int index, void *data, int arg)
{
    SyrPart *s = (SyrPart *)data;
    const int one = 1;
    (void)index, (void)arg;
    for (npy_intp j = s->c.lo; j < s->c.hi; j++) {
        double xd = s->c.size == 8 ? ((const double *)s->x)[j] : (double)((const float *)s->x)[j];
        if (xd == 0.0) continue; /* OpenBLAS skips the column */
        npy_intp r0;
        int len;
        char *col = column_at(&s->c, j, &r0, &len);
        char *copy = column_begin(&s->c, j, col, len);
        if (s->c.size == 8) {
            double sc = s->alpha * ((const double *)s->x)[j];
            s->fn(&len, &sc, s->x + r0 * s->c.es, &one, col, &one);
        }
        else {
            float sc = (float)s->alpha * ((const float *)s->x)[j];
            s->fn(&len, &sc, s->x + r0 * s->c.es, &one, col, &one);
        }
        column_end(&s->c, j, col, len, copy);
    }
}

/* syr(fn, alpha, x, a, lower) -> (kept, lost) or None: the real symmetric rank-1 update a += alpha x x^T of
 * the square Fortran-ordered a (float32 or float64, aligned, writeable), or of the packed triangle a of
 * n (n + 1) / 2 elements (spr: its columns one after the other), with the contiguous x of its dtype,
 * through fn (the routine's axpy in the one-thread instance), column by column as described above, in parts
 * on the pool where the plain call would be parallel.  kept: [(column, rows, values before the call)] of the
 * columns that hold an Inf or a NaN after it; lost: a copy could not be made.  None, having done nothing,
 * where the operands are not such arrays, alpha is not a finite float, or x and a share memory. */
static PyObject *
guard_syr(PyObject *self, PyObject *args)
{
    unsigned long long fn;
    double alpha;
    PyArrayObject *x, *a;
    int lower;
    (void)self;
    if (!PyArg_ParseTuple(args, "KdO!O!p:syr", &fn, &alpha, &PyArray_Type, &x, &PyArray_Type, &a, &lower))
        return NULL;
    int type = PyArray_TYPE(a), size = type == NPY_FLOAT64 ? 8 : type == NPY_FLOAT32 ? 4 : 0;
    int packed = PyArray_NDIM(a) == 1;
    npy_intp n = PyArray_NDIM(x) == 1 ? PyArray_DIM(x, 0) : -1;
    if (fn == 0 || size == 0 || !isfinite(alpha) || PyArray_TYPE(x) != type || n < 0 || n > INT_MAX
        || (packed ? PyArray_DIM(a, 0) != n * (n + 1) / 2
                   : PyArray_NDIM(a) != 2 || PyArray_DIM(a, 0) != n || PyArray_DIM(a, 1) != n)
        || !PyArray_IS_F_CONTIGUOUS(a) || !PyArray_ISALIGNED(a) || !PyArray_ISWRITEABLE(a)
        || !PyArray_ISNOTSWAPPED(a) || !PyArray_ISNOTSWAPPED(x) || !PyArray_ISALIGNED(x)
        || (n > 1 && PyArray_STRIDE(x, 0) != size))
        Py_RETURN_NONE;
    const char *xb = PyArray_BYTES(x), *ab = PyArray_BYTES(a);
    npy_intp abytes = PyArray_NBYTES(a);
    if (xb < ab + abytes && ab < xb + n * size) Py_RETURN_NONE; /* x and a share memory */
    if (alpha == 0.0) return Py_BuildValue("([]O)", Py_False); /* OpenBLAS returns at once */
    int nparts = column_parts(n, size, drop_in_threads != NULL ? drop_in_threads() : 1);
    SyrPart parts[MAX_PARTS];
    memset(parts, 0, sizeof parts);
    for (int p = 0; p < nparts; p++) parts[p] = (SyrPart){{0}, xb, alpha, (axpy_t)(uintptr_t)fn};
    Columns whole = {PyArray_BYTES(a), n, 0, n, lower, packed, size, 0, size, size == 8 ? SAFE_BIG64 : SAFE_BIG32,
                     {NULL, 0, 0, 0}};
    columns_split((char *)parts, sizeof(SyrPart), nparts, &whole);
    return columns_run(syr_part, (char *)parts, sizeof(SyrPart), nparts, size);
}

/* ------------------------------------------------------------- the other rank updates, in columns */

/* syr2, spr2 (real) and her, hpr, her2, hpr2 (complex) are, like syr, one axpy per term per column of the
 * triangle in OpenBLAS (driver/level2/syr2_k.c, spr2_k.c, zher_k.c, zhpr_k.c, zher2_k.c, zhpr2_k.c, their
 * *_thread.c twins, the small-n loops of interface/syr2.c and spr2.c): column j gets, in this order,
 *   syr2  a_j += (alpha x[j]) y  then  a_j += (alpha y[j]) x
 *   her   a_j += (alpha re x[j], -alpha im x[j]) x                     (alpha real)
 *   her2  a_j += (ar xr - ai xi, -ai xr - ar xi) y  then  a_j += (ar yr + ai yi, ai yr - ar yi) x
 *         (xr, xi: x[j]; yr, yi: y[j]; alpha = ar + i ai)
 * over the column's rows of the triangle, then (Hermitian) the imaginary part of the diagonal set to 0.
 * The paths differ in one thing: the threaded one skips a term whose x[j] (y[j]) is 0, the one-thread one
 * and the small-n loop make it with a zero scalar, which turns a -0.0 of A into +0.0 where the products are
 * +0.0.  `skip` says which the plain call takes (the caller's choice: n, the thread setting).  A term with
 * a nonzero scalar is the routine's axpy on the one-thread instance (its kernel, so its bits); a zero
 * scalar's term is made here (the axpy interface returns at once on a zero scalar): its products are
 * signed zeros, so a + s x is the same whatever the kernel's order or fusing of the operations. */
typedef struct {
    Columns c;
    const char *x, *y;           /* y: NULL for her/hpr */
    double ar, ai;
    axpy_t fn;
    int skip;
} RankPart;

/* The scalars OpenBLAS computes for column j's terms, in the routine's precision (its operations: a
 * product, or the difference or sum of two products, each rounded; never fused). */
#if defined(__GNUC__)
__attribute__((optimize("fp-contract=off")))
#endif
static int
rank_scalars(const RankPart *s, npy_intp j, double sc[2][2])
{
    if (!s->c.cplx) {
        if (s->c.size == 8) {
            sc[0][0] = s->ar * ((const double *)s->x)[j];
            sc[1][0] = s->ar * ((const double *)s->y)[j];
        }
        else {
            float ar = (float)s->ar;
            sc[0][0] = (float)(ar * ((const float *)s->x)[j]);
            sc[1][0] = (float)(ar * ((const float *)s->y)[j]);
        }
        sc[0][1] = sc[1][1] = 0.0;
        return s->y != NULL ? 2 : 1;
    }
    if (s->c.size == 8) {
        const double *x = (const double *)s->x + 2 * j, ar = s->ar, ai = s->ai;
        if (s->y == NULL) {
            sc[0][0] = ar * x[0], sc[0][1] = -ar * x[1];
            return 1;
        }
        const double *y = (const double *)s->y + 2 * j;
        volatile double p, q; /* each product rounded on its own, as OpenBLAS's C computes them */
        p = ar * x[0], q = ai * x[1], sc[0][0] = p - q;
        p = -ai * x[0], q = ar * x[1], sc[0][1] = p - q;
        p = ar * y[0], q = ai * y[1], sc[1][0] = p + q;
        p = ai * y[0], q = ar * y[1], sc[1][1] = p - q;
        return 2;
    }
    const float *x = (const float *)s->x + 2 * j, ar = (float)s->ar, ai = (float)s->ai;
    if (s->y == NULL) {
        sc[0][0] = (float)(ar * x[0]), sc[0][1] = (float)(-ar * x[1]);
        return 1;
    }
    const float *y = (const float *)s->y + 2 * j;
    volatile float p, q;
    p = ar * x[0], q = ai * x[1], sc[0][0] = (float)(p - q);
    p = -ai * x[0], q = ar * x[1], sc[0][1] = (float)(p - q);
    p = ar * y[0], q = ai * y[1], sc[1][0] = (float)(p + q);
    p = ai * y[0], q = ar * y[1], sc[1][1] = (float)(p - q);
    return 2;
}

/* a += s v over len elements with a zero scalar s (see above). */
static void
rank_zero_term(char *a, const char *v, int len, const double s[2], int size, int cplx)
{
    if (size == 8) {
        double *c = (double *)a, sr = s[0], si = s[1];
        const double *u = (const double *)v;
        if (!cplx) for (int i = 0; i < len; i++) c[i] = c[i] + sr * u[i];
        else
            for (int i = 0; i < len; i++) {
                double re = c[2 * i] + sr * u[2 * i] - si * u[2 * i + 1];
                double im = c[2 * i + 1] + sr * u[2 * i + 1] + si * u[2 * i];
                c[2 * i] = re, c[2 * i + 1] = im;
            }
    }
    else {
        float *c = (float *)a, sr = (float)s[0], si = (float)s[1];
        const float *u = (const float *)v;
        if (!cplx) for (int i = 0; i < len; i++) c[i] = c[i] + sr * u[i];
        else
            for (int i = 0; i < len; i++) {
                float re = c[2 * i] + sr * u[2 * i] - si * u[2 * i + 1];
                float im = c[2 * i + 1] + sr * u[2 * i + 1] + si * u[2 * i];
                c[2 * i] = re, c[2 * i + 1] = im;
            }
    }
}

static void
rank_part(int index, void *data, int arg)
{
    RankPart *s = (RankPart *)data;
    const int one = 1;
    (void)index, (void)arg;
    for (npy_intp j = s->c.lo; j < s->c.hi; j++) {
        double sc[2][2];
        int nterms = rank_scalars(s, j, sc), len;
        npy_intp r0;
        char *col = column_at(&s->c, j, &r0, &len);
        char *copy = column_begin(&s->c, j, col, len);
        for (int k = 0; k < nterms; k++) {
            /* term k: the scalar from x[j] times y (her: x), then the one from y[j] times x */
            const char *v = (nterms == 1 || k == 1 ? s->x : s->y) + r0 * s->c.es;
            if (sc[k][0] == 0.0 && sc[k][1] == 0.0) {
                /* a zero scalar: skipped only where the threaded path skips it (x[j], y[j] is 0; a
                 * scalar that underflows or cancels to 0 goes to the kernel there too) */
                const char *src = (nterms == 1 || k == 0 ? s->x : s->y) + j * s->c.es;
                int zero = s->c.size == 8 ? ((const double *)src)[0] == 0.0 && (!s->c.cplx || ((const double *)src)[1] == 0.0)
                                          : ((const float *)src)[0] == 0.0f && (!s->c.cplx || ((const float *)src)[1] == 0.0f);
                if (!(zero && s->skip)) rank_zero_term(col, v, len, sc[k], s->c.size, s->c.cplx);
                continue;
            }
            if (s->c.size == 8) {
                double c[2] = {sc[k][0], sc[k][1]};
                s->fn(&len, c, v, &one, col, &one);
            }
            else {
                float c[2] = {(float)sc[k][0], (float)sc[k][1]};
                s->fn(&len, c, v, &one, col, &one);
            }
        }
        if (s->c.cplx) { /* Hermitian: the diagonal's imaginary part */
            char *d = col + (s->c.lower ? 0 : (npy_intp)(len - 1) * s->c.es) + s->c.size;
            if (s->c.size == 8) *(double *)d = 0.0;
            else *(float *)d = 0.0f;
        }
        column_end(&s->c, j, col, len, copy);
    }
}

/* rank(fn, alpha, x, y, a, lower, small) -> (kept, lost) or None: syr2/spr2 (float32, float64; y an array)
 * or her/hpr (complex64, complex128; y None, alpha real) or her2/hpr2 (y an array) of the square
 * Fortran-ordered a or the packed triangle a, with contiguous x and y of a's dtype, through fn (the
 * routine's axpy in the one-thread instance), column by column as described above, in parts on the pool
 * where the plain call would be parallel.  small: the plain call takes its one-thread form (no term skipped)
 * below this n, and wherever the drop-in's instance runs on one thread.  kept, lost: as syr().  None,
 * having done nothing, where the operands are not such arrays, alpha is not finite, or a shares memory
 * with x or y. */
static PyObject *
guard_rank(PyObject *self, PyObject *args)
{
    unsigned long long fn;
    Py_complex alpha;
    PyArrayObject *x, *a;
    PyObject *yo;
    int lower, plain_threads = 1;
    Py_ssize_t small;
    (void)self;
    if (!PyArg_ParseTuple(args, "KDO!OO!pn:rank", &fn, &alpha, &PyArray_Type, &x, &yo, &PyArray_Type, &a, &lower,
                          &small))
        return NULL;
    PyArrayObject *y = yo == Py_None ? NULL : (PyArrayObject *)yo;
    if (y != NULL && !PyArray_Check(yo)) Py_RETURN_NONE;
    int type = PyArray_TYPE(a);
    int size = type == NPY_FLOAT64 || type == NPY_COMPLEX128 ? 8 : type == NPY_FLOAT32 || type == NPY_COMPLEX64 ? 4 : 0;
    int cplx = type == NPY_COMPLEX64 || type == NPY_COMPLEX128, es = size * (cplx ? 2 : 1);
    int packed = PyArray_NDIM(a) == 1;
    npy_intp n = PyArray_NDIM(x) == 1 ? PyArray_DIM(x, 0) : -1;
    if (fn == 0 || size == 0 || !isfinite(alpha.real) || !isfinite(alpha.imag) || (!cplx && y == NULL)
        || ((!cplx || y == NULL) && alpha.imag != 0.0) || PyArray_TYPE(x) != type || n < 0 || n > INT_MAX
        || (packed ? PyArray_DIM(a, 0) != n * (n + 1) / 2
                   : PyArray_NDIM(a) != 2 || PyArray_DIM(a, 0) != n || PyArray_DIM(a, 1) != n)
        || !PyArray_IS_F_CONTIGUOUS(a) || !PyArray_ISALIGNED(a) || !PyArray_ISWRITEABLE(a)
        || !PyArray_ISNOTSWAPPED(a) || !PyArray_ISNOTSWAPPED(x) || !PyArray_ISALIGNED(x)
        || (n > 1 && PyArray_STRIDE(x, 0) != es) || drop_in_threads == NULL)
        Py_RETURN_NONE;
    if (y != NULL && (PyArray_TYPE(y) != type || PyArray_NDIM(y) != 1 || PyArray_DIM(y, 0) != n
                      || !PyArray_ISNOTSWAPPED(y) || !PyArray_ISALIGNED(y) || (n > 1 && PyArray_STRIDE(y, 0) != es)))
        Py_RETURN_NONE;
    const char *xb = PyArray_BYTES(x), *yb = y != NULL ? PyArray_BYTES(y) : NULL, *ab = PyArray_BYTES(a);
    npy_intp abytes = PyArray_NBYTES(a);
    if (xb < ab + abytes && ab < xb + n * es) Py_RETURN_NONE; /* x and a share memory */
    if (yb != NULL && yb < ab + abytes && ab < yb + n * es) Py_RETURN_NONE;
    if (alpha.real == 0.0 && alpha.imag == 0.0) return Py_BuildValue("([]O)", Py_False); /* OpenBLAS returns */
    plain_threads = drop_in_threads();
    int nparts = column_parts(n, es, plain_threads), skip = plain_threads > 1 && n >= small;
    RankPart parts[MAX_PARTS];
    memset(parts, 0, sizeof parts);
    for (int p = 0; p < nparts; p++)
        parts[p] = (RankPart){{0}, xb, yb, alpha.real, alpha.imag, (axpy_t)(uintptr_t)fn, skip};
    Columns whole = {PyArray_BYTES(a), n, 0, n, lower, packed, size, cplx, es, size == 8 ? SAFE_BIG64 : SAFE_BIG32,
                     {NULL, 0, 0, 0}};
    columns_split((char *)parts, sizeof(RankPart), nparts, &whole);
    return columns_run(rank_part, (char *)parts, sizeof(RankPart), nparts, es);
}

static PyObject *
guard_sizes(PyObject *self, PyObject *args)
{
    Py_ssize_t chunk = 0, parallel = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "|nn:sizes", &chunk, &parallel)) return NULL;
    if (chunk > 0) CHUNK_BYTES = chunk;
    if (parallel > 0) PARALLEL_BYTES = parallel;
    return Py_BuildValue("(nn)", (Py_ssize_t)CHUNK_BYTES, (Py_ssize_t)PARALLEL_BYTES);
}

static PyMethodDef methods[] = {
    {"nonfinite", guard_nonfinite, METH_VARARGS,
     "nonfinite(a, level=0) -> bool or None: whether the float or complex array a (at most 2-D) holds an Inf or a "
     "NaN (level 1: or an element of 2**1000 or more, single 2**100; level 2: 2**490, single 2**45) -- a large "
     "one read in parts on the pool; None where a is not one it scans (dtype, byte order, rank)."},
    {"triangle", guard_triangle, METH_VARARGS,
     "triangle(a, lower, level=0) -> bool or None: nonfinite() of the triangle of the square Fortran-ordered a "
     "that a symmetric or Hermitian rank update reads and writes; None where a is not such an array."},
    {"syr", guard_syr, METH_VARARGS,
     "syr(fn, alpha, x, a, lower) -> (kept, lost) or None: the real symmetric rank-1 update a += alpha x x^T column "
     "by column as OpenBLAS makes it (one axpy each), each column read for Inf, NaN or large values just before "
     "its axpy; kept: [(column, rows, values before)] of the columns holding an Inf or a NaN after it."},
    {"rank", guard_rank, METH_VARARGS,
     "rank(fn, alpha, x, y, a, lower, small) -> (kept, lost) or None: syr2/spr2 (real), her/hpr (y None) or "
     "her2/hpr2 (complex) column by column as OpenBLAS makes them (one axpy per term, terms of a zero x[j] or "
     "y[j] skipped where the plain call is threaded and n >= small), each column read for Inf, NaN or large "
     "values just before its axpy calls; kept: [(column, rows, values before)] as syr()."},
    {"guarded", guard_guarded, METH_VARARGS,
     "guarded(kind, fn, typenum, n, x, offx, incx, y, offy, incy, s1, s2, a, m, real_scalars) -> (kept, lost) or "
     "None: a Level-1 call or ger in chunks, each chunk's outputs kept where they hold a non-finite value after it "
     "(None: not a call the executor takes; nothing done)."},
    {"configure", guard_configure, METH_VARARGS,
     "configure(slot, get_num_threads, saxpy=0, daxpy=0) -> (one-pass saxpy, one-pass daxpy): the pool slot and "
     "the openblas_get_num_threads address of the drop-in's instance (its calls are cut into that many parts), "
     "the one-thread instance's saxpy_/daxpy_ (the one-pass kernels are used where they give their bits)."},
    {"sizes", guard_sizes, METH_VARARGS,
     "sizes(chunk=0, parallel=0) -> (chunk bytes, bytes from which work is split on the pool); sets those given"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "tileblas.rblas._guard",
    "Native half of the non-finite safety of tileblas.rblas' compute mode.", -1, methods,
};

PyMODINIT_FUNC
PyInit__guard(void)
{
    import_array();
    pool_api = pool_api_import(); /* NULL: no pool in this build, one thread, calls not counted */
    return PyModule_Create(&module);
}
