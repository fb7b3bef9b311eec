/*
 * The arrays of the small-call path (tileblas.blas._fastpath; _fp.h has the plan of the files): every array
 * it makes (64-byte boundary, NumPy's own), copies of pieces (blocked, conjugated where asked), the
 * conjugation and zeroing of pieces and triangles, the output of a call, and the conversions of operands
 * the Python path would convert.
 */
#include "_fp.h"
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* dst (Fortran order, leading dimension ldd elements) = the rows x cols piece of src whose element (i, j)
 * lies i * rs + j * cs bytes from src; conjugated where conj (complex precisions).  In 32 x 32 blocks, so
 * that a transposing copy (a C-ordered source) reads and writes whole cache lines (NumPy's C-to-Fortran
 * copy does not: docs/developer/drop-in-internals.md, "Why this BLAS, called this way"). */
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

void
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
void
conj_piece(char *c, npy_intp ldc, npy_intp rows, npy_intp cols, int prec)
{
    for (npy_intp j = 0; j < cols; j++) conj_column(c, ldc, j, 0, rows, prec);
}

/* Conjugate the strictly lower (lower) or upper triangle of the n x n Fortran-ordered c (leading
 * dimension ldc) of a complex precision; the diagonal of a Hermitian result is real and stays as it is. */
void
conj_triangle(char *c, npy_intp ldc, npy_intp n, int lower, int prec)
{
    for (npy_intp j = 0; j < n; j++) conj_column(c, ldc, j, lower ? j + 1 : 0, lower ? n : j, prec);
}

/* Zero the strict triangle of the n x n c (Fortran order, leading dimension ldc elements of es bytes)
 * opposite the stored one (lower: the stored triangle is the lower one). */
void
zero_other_triangle(char *c, npy_intp ldc, npy_intp n, int lower, size_t es)
{
    for (npy_intp j = 0; j < n; j++) {
        if (lower) memset(c + (size_t)(j * ldc) * es, 0, (size_t)j * es);
        else memset(c + (size_t)(j * ldc + j + 1) * es, 0, (size_t)(n - j - 1) * es);
    }
}

/* The conjugate of a scalar of a complex precision, in place. */
void
conj_scalar(scalar_t *v, int prec)
{
    if (prec == 2) v->cf[1] = -v->cf[1];
    else v->cd[1] = -v->cd[1];
}

/* ------------------------------------------------------------------------ arrays the path makes
 *
 * Every array this path makes (a result, a copy of an operand) starts on a 64-byte boundary.  NumPy's
 * default allocation is malloc's, 16-byte aligned, and OpenBLAS's small kernels run slower on operands that
 * start past a cache line's start; which a call got depended on the heap, so on the process
 * (docs/developer/drop-in-internals.md, "The small-call path", has the figures).  The arrays are NumPy's
 * own in every other way: they own their data and free it through the handler below, which NumPy keeps
 * with each (a resize goes through it too); NumPy's allocator for the caller's arrays is left as it is. */
#define ARRAY_ALIGN 64
#define NUMPY_TRACE_DOMAIN 389047 /* numpy.lib.tracemalloc_domain */
/* Each block is one malloc (calloc) of size + HEADER bytes; the data starts on the first boundary at
 * least two words in, the words just below it keep the block's start and the data's size (a realloc
 * needs it): one malloc, where glibc's posix_memalign costs more (docs/developer/drop-in-internals.md,
 * "The small-call path"). */
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
PyObject *fp_aligned_capsule = NULL; /* the handler as NumPy takes it (fp_arrays_init, at import) */

/* Make the handler's capsule (at the module's import): 0, or -1 with an exception. */
int
fp_arrays_init(void)
{
    fp_aligned_capsule = PyCapsule_New(&aligned_handler, "mem_handler", NULL);
    return fp_aligned_capsule == NULL ? -1 : 0;
}

/* A new array of nd dims of the type, Fortran-ordered when fortran, zeros when zero, else uninitialised,
 * its data on a 64-byte boundary (a new reference; NULL with an exception on failure).  The data is
 * allocated here and handed to the array with this handler, as NumPy does for its own (owned data, the
 * handler kept with it for a resize or the free); making NumPy allocate through it instead, by setting
 * it in force around the call, costs two context-variable writes an array more
 * (docs/developer/drop-in-internals.md, "The small-call path"). */
PyArrayObject *
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
    Py_INCREF(fp_aligned_capsule);
    ((PyArrayObject_fields *)r)->mem_handler = fp_aligned_capsule;
    return (PyArrayObject *)r;
}

/* A new Fortran-ordered array of a's shape and type, uninitialised (a new reference; NULL with an
 * exception on failure). */
PyArrayObject *
fortran_empty(PyArrayObject *a)
{
    return new_array(PyArray_NDIM(a), PyArray_DIMS(a), PyArray_TYPE(a), 1, 0);
}

/* A new Fortran-ordered copy of any array (a new reference; NULL with an exception on failure). */
PyArrayObject *
fortran_copy(PyArrayObject *a)
{
    PyArrayObject *c = fortran_empty(a);
    if (c != NULL && PyArray_CopyInto(c, a) < 0) Py_CLEAR(c);
    return c;
}

/* A new Fortran-ordered copy of a plain matrix of precision prec, conjugated where conj (a new reference,
 * NULL with an exception set on failure). */
PyArrayObject *
fortran_copy_as(PyArrayObject *a, int prec, int conj)
{
    PyArrayObject *c;
    if ((c = fortran_empty(a)) == NULL) return NULL;
    copy_piece(PyArray_BYTES(c), PyArray_DIM(c, 0), PyArray_BYTES(a), PyArray_STRIDE(a, 0), PyArray_STRIDE(a, 1),
               PyArray_DIM(a, 0), PyArray_DIM(a, 1), prec, conj);
    return c;
}

/* A new c of at least this many bytes is NumPy's own allocation (output()).  Its size is then what NumPy
 * asks of malloc for an array of that shape, so the heap can hand it a block that NumPy's arrays of that
 * size left (the temporaries that made the caller's operands, as SciPy's results get them); ours, 80 bytes
 * larger, never fits one and took fresh pages: a page fault each, 512 in the first dgemm of order 512
 * (docs/developer/drop-in-internals.md, "The first calls of a process").  A Level-3 kernel only writes c or
 * scales it element by element, so where it lies changes no bit; at this size the line it starts on
 * changes no time either (the same page of the docs). */
#define NUMPY_RESULT_BYTES ((size_t)1 << 20)

/* The output: *given* updated in place when allowed, else a new Fortran array (zeros when ``zero``,
 * else uninitialised, when *given* is None, NumPy's own from NUMPY_RESULT_BYTES up; a copy of *given*
 * otherwise).  NULL + no exception: Python
 * path; NULL + exception: error.  An input that shares memory with an in-place output is read from a copy
 * of its own (same layout), as the Python path does: ``inputs[i]`` is replaced by it, a new reference kept
 * in ``copies[i]`` for the caller to release. */
PyArrayObject *
output(PyObject *given, int prec, int overwrite, npy_intp m, npy_intp n, int zero,
       PyArrayObject **inputs, int ninputs, PyArrayObject **copies)
{
    PyArrayObject *c;
    if (given == Py_None) {
        npy_intp dims[2] = {m, n};
        if ((double)m * (double)n * (double)elsize(prec) >= (double)NUMPY_RESULT_BYTES)
            return (PyArrayObject *)(zero ? PyArray_ZEROS(2, dims, TYPENUM[prec], 1)
                                          : PyArray_EMPTY(2, dims, TYPENUM[prec], 1));
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

/* A new Fortran-ordered copy of a in the dtype of precision prec, where a's dtype converts as the Python
 * path converts it (real, integer or bool to any; complex to complex: astype(dtype, order='F')); a new
 * reference, or NULL (no exception) where it does not. */
PyObject *
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
PyObject *
convert_operand(PyObject *o, int prec, int inout, int overwrite, int *inplace)
{
    PyArrayObject *a;
    PyObject *r;
    int nd, plain;
    if (!PyArray_CheckExact(o)) return NULL;
    a = (PyArrayObject *)o;
    nd = PyArray_NDIM(a);
    if ((nd != 1 && nd != 2) || PyArray_DIM(a, 0) < 1 || PyArray_DIM(a, nd - 1) < 1) return NULL;
    if (PyArray_SIZE(a) > fp_cfg.convert_max) return NULL;
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

/* A Level-1/2 array argument the Python path would copy (tileblas.blas._common.as_vector, as_inout): an
 * ndarray of a real, integer or bool dtype other than the routine's (or complex, for a complex routine),
 * byte-swapped, unaligned, or neither Fortran- nor C-contiguous.  Copied here as the Python path does (to
 * the routine's dtype, Fortran order), so that such calls stay in C; the copy is what the call writes and
 * returns where the argument is an output, as the Python path's copy is.  A new reference, or NULL (no
 * exception) to leave the argument as it is. */
PyObject *
convert_array(PyObject *o, int prec)
{
    PyArrayObject *a;
    if (!PyArray_CheckExact(o)) return NULL;
    a = (PyArrayObject *)o;
    if (PyArray_NDIM(a) < 1 || PyArray_SIZE(a) < 1 || PyArray_SIZE(a) > fp_cfg.convert_max) return NULL;
    if (PyArray_TYPE(a) == TYPENUM[prec] && PyArray_ISALIGNED(a) && PyArray_ISNOTSWAPPED(a)
        && (PyArray_IS_F_CONTIGUOUS(a) || PyArray_IS_C_CONTIGUOUS(a)))
        return NULL;  /* the common case: the C path takes it as it is */
    return cast_copy(a, prec);
}
