/*
 * tileblas.kernels._native -- the only compiled code in tileblas.
 *
 * One generic caller for native BLAS/LAPACK entry points that takes every argument by pointer (the
 * Fortran calling convention) or as a register-sized integer (CBLAS ints and enums), and calls it with
 * the GIL released.  The Python kernel layer (tileblas.kernels._openblas) resolves symbol addresses once and passes
 * a compact signature string per call, so a call costs a few hundred nanoseconds, not the microseconds of
 * ctypes.
 *
 * call(address, signature, *args)
 *   signature[0] is the return kind: 'v' void, 'f' float, 'd' double, 'i' int, 'l' size_t/long.
 *   signature[1:] has one code per native argument:
 *     'c' one-character str, passed by pointer, with a hidden length 1 appended (Fortran strings)
 *     'i' Python int -> BLAS integer by pointer   'I' Python int -> integer by value
 *     'f' float -> float32 by pointer             'd' float -> float64 by pointer
 *     'C' complex -> complex64 by pointer         'Z' complex -> complex128 by pointer
 *     'a' numpy.ndarray -> pointer to its first element
 *     'A' numpy.ndarray and a Python int byte offset (two Python arguments) -> pointer
 *     'p' Python int address -> pointer
 * Validation of shapes, strides and flags is the caller's job; this file only converts and calls.
 *
 * 64-bit integers (ILP64).  BLAS integers ('i', 'I', and an 'i' return) are 32-bit.  Each 32-bit entry
 * point may have a twin in an ILP64 library, found through a resolver that the Python layer installs
 * (set_twin_resolver): a call whose integer argument does not fit 32 bits is converted again with 64-bit
 * integers and made on the twin, so the common call pays nothing for it.  With no twin it raises
 * OverflowError, before anything is called.  force64(True) makes every call of the calling thread take
 * the twin (SciPy's ilp64=True functions; tests).  call64 always uses 64-bit integers on the address it
 * is given.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>
#include <string.h>

#include "_pool.h"

#define MAXARGS 32

typedef union {
    int32_t i;
    int64_t q;
    float f;
    double d;
    char c;
    float cf[2];
    double cd[2];
} slot_t;

typedef void *P;

#define ARGS1 a[0]
#define ARGS2 ARGS1, a[1]
#define ARGS3 ARGS2, a[2]
#define ARGS4 ARGS3, a[3]
#define ARGS5 ARGS4, a[4]
#define ARGS6 ARGS5, a[5]
#define ARGS7 ARGS6, a[6]
#define ARGS8 ARGS7, a[7]
#define ARGS9 ARGS8, a[8]
#define ARGS10 ARGS9, a[9]
#define ARGS11 ARGS10, a[10]
#define ARGS12 ARGS11, a[11]
#define ARGS13 ARGS12, a[12]
#define ARGS14 ARGS13, a[13]
#define ARGS15 ARGS14, a[14]
#define ARGS16 ARGS15, a[15]
#define ARGS17 ARGS16, a[16]
#define ARGS18 ARGS17, a[17]
#define ARGS19 ARGS18, a[18]
#define ARGS20 ARGS19, a[19]
#define ARGS21 ARGS20, a[20]
#define ARGS22 ARGS21, a[21]
#define ARGS23 ARGS22, a[22]
#define ARGS24 ARGS23, a[23]
#define T1 P
#define T2 T1, P
#define T3 T2, P
#define T4 T3, P
#define T5 T4, P
#define T6 T5, P
#define T7 T6, P
#define T8 T7, P
#define T9 T8, P
#define T10 T9, P
#define T11 T10, P
#define T12 T11, P
#define T13 T12, P
#define T14 T13, P
#define T15 T14, P
#define T16 T15, P
#define T17 T16, P
#define T18 T17, P
#define T19 T18, P
#define T20 T19, P
#define T21 T20, P
#define T22 T21, P
#define T23 T22, P
#define T24 T23, P

/* tileblas.kernels._pool's C API (_pool.h): every call is counted in flight (fork() and the interpreter's
 * exit wait for the calls in flight); NULL where the pool is not built */
static const PoolAPI *pool_api = NULL;

#define CASE(N, RT, OUT) case N: OUT ((RT (*)(T##N))fn)(ARGS##N); break;
#define DISPATCH(RT, OUT)                                                                     \
    if (pool_api != NULL) pool_api->enter();                                                  \
    switch (n) {                                                                              \
        case 0: OUT ((RT (*)(void))fn)(); break;                                              \
        CASE(1, RT, OUT) CASE(2, RT, OUT) CASE(3, RT, OUT) CASE(4, RT, OUT) CASE(5, RT, OUT)  \
        CASE(6, RT, OUT) CASE(7, RT, OUT) CASE(8, RT, OUT) CASE(9, RT, OUT)                   \
        CASE(10, RT, OUT) CASE(11, RT, OUT) CASE(12, RT, OUT) CASE(13, RT, OUT)               \
        CASE(14, RT, OUT) CASE(15, RT, OUT) CASE(16, RT, OUT) CASE(17, RT, OUT)               \
        CASE(18, RT, OUT) CASE(19, RT, OUT) CASE(20, RT, OUT) CASE(21, RT, OUT)               \
        CASE(22, RT, OUT) CASE(23, RT, OUT) CASE(24, RT, OUT)                                 \
    }                                                                                         \
    if (pool_api != NULL) pool_api->leave();

/* Convert args[2:] by `sig`, with 32-bit (wide == 0) or 64-bit BLAS integers, and call fn.  A 32-bit
 * integer argument out of range sets OverflowError and *overflow = 1, having called nothing. */
static PyObject *
do_call(void *fn, PyObject *const *args, Py_ssize_t nargs, int wide, int *overflow)
{
    slot_t slots[MAXARGS];
    P a[MAXARGS];
    int n = 0, nchar = 0;
    Py_ssize_t k = 2, sig_len;
    const char *sig;

    sig = PyUnicode_AsUTF8AndSize(args[1], &sig_len);
    if (sig == NULL)
        return NULL;
    if (sig_len < 1 || sig_len - 1 > MAXARGS) {
        PyErr_SetString(PyExc_ValueError, "bad signature length");
        return NULL;
    }
    for (Py_ssize_t s = 1; s < sig_len; s++) {
        PyObject *o;
        if (k >= nargs) {
            PyErr_Format(PyExc_TypeError, "signature %s needs more arguments", sig);
            return NULL;
        }
        o = args[k++];
        switch (sig[s]) {
        case 'c': {
            Py_ssize_t len;
            const char *c = PyUnicode_AsUTF8AndSize(o, &len);
            if (c == NULL) return NULL;
            if (len != 1) {
                PyErr_SetString(PyExc_ValueError, "character argument must have length 1");
                return NULL;
            }
            slots[n].c = c[0];
            a[n] = &slots[n];
            nchar++;
            break;
        }
        case 'i':
        case 'I': {
            long long v = PyLong_AsLongLong(o);
            if (v == -1 && PyErr_Occurred()) return NULL;
            if (!wide && (v > INT32_MAX || v < INT32_MIN)) {
                PyErr_Format(PyExc_OverflowError, "integer argument %lld does not fit a 32-bit BLAS integer", v);
                *overflow = 1;
                return NULL;
            }
            if (sig[s] == 'I')
                a[n] = (P)(intptr_t)v;
            else {
                if (wide) slots[n].q = (int64_t)v; else slots[n].i = (int32_t)v;
                a[n] = &slots[n];
            }
            break;
        }
        case 'f':
        case 'd': {
            double v = PyFloat_AsDouble(o);
            if (v == -1.0 && PyErr_Occurred()) return NULL;
            if (sig[s] == 'f') slots[n].f = (float)v; else slots[n].d = v;
            a[n] = &slots[n];
            break;
        }
        case 'C':
        case 'Z': {
            Py_complex v = PyComplex_AsCComplex(o);
            if (v.real == -1.0 && PyErr_Occurred()) return NULL;
            if (sig[s] == 'C') { slots[n].cf[0] = (float)v.real; slots[n].cf[1] = (float)v.imag; }
            else { slots[n].cd[0] = v.real; slots[n].cd[1] = v.imag; }
            a[n] = &slots[n];
            break;
        }
        case 'a':
        case 'A': {
            char *data;
            if (!PyArray_Check(o)) {
                PyErr_SetString(PyExc_TypeError, "expected a numpy.ndarray");
                return NULL;
            }
            data = (char *)PyArray_DATA((PyArrayObject *)o);
            if (sig[s] == 'A') {
                Py_ssize_t off;
                if (k >= nargs) {
                    PyErr_SetString(PyExc_TypeError, "'A' needs an offset argument");
                    return NULL;
                }
                off = PyLong_AsSsize_t(args[k++]);
                if (off == -1 && PyErr_Occurred()) return NULL;
                data += off;
            }
            a[n] = data;
            break;
        }
        case 'p': {
            void *p = PyLong_AsVoidPtr(o);
            if (p == NULL && PyErr_Occurred()) return NULL;
            a[n] = p;
            break;
        }
        default:
            PyErr_Format(PyExc_ValueError, "unknown signature code %c", sig[s]);
            return NULL;
        }
        n++;
    }
    if (k != nargs) {
        PyErr_Format(PyExc_TypeError, "signature %s takes fewer arguments than given", sig);
        return NULL;
    }
    /* Fortran hidden string lengths, one per character argument, by value. */
    for (int c = 0; c < nchar; c++) {
        if (n >= 24) {
            PyErr_SetString(PyExc_ValueError, "too many native arguments");
            return NULL;
        }
        a[n++] = (P)(intptr_t)1;
    }
    if (n > 24) {
        PyErr_SetString(PyExc_ValueError, "too many native arguments");
        return NULL;
    }
    switch (sig[0]) {
    case 'v': {
        Py_BEGIN_ALLOW_THREADS
        DISPATCH(void, )
        Py_END_ALLOW_THREADS
        Py_RETURN_NONE;
    }
    case 'f': {
        float r = 0;
        Py_BEGIN_ALLOW_THREADS
        DISPATCH(float, r =)
        Py_END_ALLOW_THREADS
        return PyFloat_FromDouble((double)r);
    }
    case 'd': {
        double r = 0;
        Py_BEGIN_ALLOW_THREADS
        DISPATCH(double, r =)
        Py_END_ALLOW_THREADS
        return PyFloat_FromDouble(r);
    }
    case 'i': {
        if (wide) {
            int64_t r = 0;
            Py_BEGIN_ALLOW_THREADS
            DISPATCH(int64_t, r =)
            Py_END_ALLOW_THREADS
            return PyLong_FromLongLong((long long)r);
        }
        int r = 0;
        Py_BEGIN_ALLOW_THREADS
        DISPATCH(int, r =)
        Py_END_ALLOW_THREADS
        return PyLong_FromLong(r);
    }
    case 'l': {
        size_t r = 0;
        Py_BEGIN_ALLOW_THREADS
        DISPATCH(size_t, r =)
        Py_END_ALLOW_THREADS
        return PyLong_FromSize_t(r);
    }
    default:
        PyErr_Format(PyExc_ValueError, "unknown return code %c", sig[0]);
        return NULL;
    }
}

/* ---- ILP64 twins ------------------------------------------------------------------------------ */

static PyObject *twins = NULL;    /* {address: twin address or None}, filled by the resolver on demand */
static PyObject *resolver = NULL; /* callable(address) -> twin address or None */
static unsigned long long wide_calls = 0; /* calls made on a twin (counted under the GIL) */
#if defined(_MSC_VER)
static __declspec(thread) int force_wide = 0;
#else
static _Thread_local int force_wide = 0;
#endif
/* Threads with force_wide set (changed under the GIL): the common call tests this plain global and reads
 * the thread-local flag (a call into the TLS resolver from a shared object) only when it is not 0. */
static int wide_threads = 0;

/* The ILP64 twin of fn, NULL with no error when there is none, NULL with an error when resolving failed. */
static void *
twin_of(PyObject *address)
{
    PyObject *t;
    if (resolver == NULL)
        return NULL;
    t = PyDict_GetItemWithError(twins, address); /* borrowed */
    if (t == NULL) {
        if (PyErr_Occurred())
            return NULL;
        t = PyObject_CallOneArg(resolver, address);
        if (t == NULL)
            return NULL;
        if (PyDict_SetItem(twins, address, t) < 0) {
            Py_DECREF(t);
            return NULL;
        }
        Py_DECREF(t); /* the dict holds it */
    }
    if (t == Py_None)
        return NULL;
    return PyLong_AsVoidPtr(t);
}

static void *
address_of(PyObject *const *args, Py_ssize_t nargs, const char *usage)
{
    void *fn;
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, usage);
        return NULL;
    }
    fn = PyLong_AsVoidPtr(args[0]);
    if (fn == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "null function address");
    return fn;
}

static PyObject *
native_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int overflow = 0;
    void *fn = address_of(args, nargs, "call(address, signature, *args)"), *twin;
    PyObject *r;
    if (fn == NULL)
        return NULL;
    if (wide_threads && force_wide) {
        twin = twin_of(args[0]);
        if (twin != NULL) {
            wide_calls++;
            return do_call(twin, args, nargs, 1, &overflow);
        }
        if (PyErr_Occurred())
            return NULL;
    }
    r = do_call(fn, args, nargs, 0, &overflow);
    if (r != NULL || !overflow)
        return r;
    {
        /* an integer over 32 bits: the same call on the ILP64 twin, where there is one */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        twin = twin_of(args[0]);
        if (twin != NULL) {
            Py_XDECREF(type); Py_XDECREF(value); Py_XDECREF(tb);
            wide_calls++;
            return do_call(twin, args, nargs, 1, &overflow);
        }
        if (PyErr_Occurred()) {
            Py_XDECREF(type); Py_XDECREF(value); Py_XDECREF(tb);
            return NULL;
        }
        PyErr_Restore(type, value, tb);
        return NULL;
    }
}

static PyObject *
native_call64(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int overflow = 0;
    void *fn = address_of(args, nargs, "call64(address, signature, *args)");
    if (fn == NULL)
        return NULL;
    return do_call(fn, args, nargs, 1, &overflow);
}

static PyObject *
set_twin_resolver(PyObject *self, PyObject *fn)
{
    PyObject *fresh = PyDict_New();
    if (fresh == NULL)
        return NULL;
    Py_XSETREF(twins, fresh);
    if (fn == Py_None) {
        Py_CLEAR(resolver);
    } else {
        if (!PyCallable_Check(fn)) {
            PyErr_SetString(PyExc_TypeError, "set_twin_resolver: resolver must be callable or None");
            return NULL;
        }
        Py_INCREF(fn);
        Py_XSETREF(resolver, fn);
    }
    Py_RETURN_NONE;
}

static PyObject *
set_force64(PyObject *self, PyObject *flag)
{
    int on = PyObject_IsTrue(flag), was = force_wide;
    if (on < 0)
        return NULL;
    wide_threads += (on != 0) - (was != 0);
    force_wide = on != 0;
    return PyBool_FromLong(was);
}

static PyObject *
get_wide_calls(PyObject *self, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong(wide_calls);
}

static PyMethodDef methods[] = {
    {"wide_calls", get_wide_calls, METH_NOARGS,
     "wide_calls(): how many calls call() has made on ILP64 twins since the module was loaded."},
    {"call", (PyCFunction)(void (*)(void))native_call, METH_FASTCALL,
     "call(address, signature, *args): call a native BLAS entry point without the GIL (32-bit BLAS integers;\n"
     "an integer over 32 bits moves the call to the entry point's ILP64 twin, if it has one)."},
    {"call64", (PyCFunction)(void (*)(void))native_call64, METH_FASTCALL,
     "call64(address, signature, *args): the same with 64-bit BLAS integers (an ILP64 entry point)."},
    {"set_twin_resolver", set_twin_resolver, METH_O,
     "set_twin_resolver(fn): fn(address) gives the ILP64 twin's address or None (None: no twins); clears the cache."},
    {"force64", set_force64, METH_O,
     "force64(flag) -> previous: make every call of this thread use the ILP64 twins (where they exist)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "tileblas.kernels._native", "GIL-free generic caller for native BLAS.", -1, methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    import_array();
    pool_api = pool_api_import(); /* NULL: no pool in this build, calls are not counted */
    return PyModule_Create(&module);
}
