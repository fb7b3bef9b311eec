/*
 * The front of the small-call path's routines (tileblas.blas._fastpath; _fp.h has the plan of the files).
 *
 * A routine of tileblas.blas is a Level3 or Level12 object with a front: called as users call it
 * (positionally or by keyword, defaults left out), it binds the arguments to the routine's parameters
 * in C, runs the small-call path, and hands the call as it was made to the Python implementation
 * (``fallback``) wherever the path declines -- including every binding it does not do itself (unknown
 * or repeated keywords, too many arguments), so that Python raises its usual errors.  No Python frame
 * stands between a small call and BLAS.  Here too: the scalars, integers and flags as the path reads them.
 */
#include "_fp.h"

const char *const FAMILY[NFAM] = {"gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm"};
const char PREFIXES[4] = {'s', 'd', 'c', 'z'};
const int TYPENUM[4] = {NPY_FLOAT, NPY_DOUBLE, NPY_CFLOAT, NPY_CDOUBLE};

/* ------------------------------------------------------------------------------------- conversion */

/* A scalar as the routine's type; 0 when the object is not a plain Python number (Python path).
 * Real routines take the real part of a complex number, as the Python implementation does. */
int
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
        memset(out, 0, sizeof *out);
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
int
get_beta(PyObject *o, int prec, int real_only, scalar_t *out)
{
    if (o == Py_None) {
        memset(out, 0, sizeof *out);
        return 1;
    }
    return get_scalar(o, prec, real_only, out);
}

/* Index of a precision letter in PREFIXES, or -1. */
int
prefix_index(char c)
{
    for (int i = 0; i < 4; i++)
        if (c == PREFIXES[i]) return i;
    return -1;
}

/* int_value for everything but an exact int. */
int
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

/* ------------------------------------------------------------------------------------- the front */

/* The arguments of a call bound to all ``want`` parameters of ``f`` in ``slot`` (borrowed references);
 * NULL when this front does not bind them (the fallback then takes the call). */
static inline PyObject *const *
bind(const Front *f, Py_ssize_t want, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **slot)
{
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames), ndef, i, j;
    if (nkw == 0 && nargs == want) return args;
    if (f->names == NULL || nargs > want || want > MAX_PARAMS) return NULL;
    ndef = PyTuple_GET_SIZE(f->defaults);
    if (nkw == 0) { /* positional, the rest defaults: the common call of a routine with optional parameters */
        if (nargs < want - ndef) return NULL;  /* a required argument missing */
        memcpy(slot, args, (size_t)nargs * sizeof *slot);
        memcpy(slot + nargs, &PyTuple_GET_ITEM(f->defaults, nargs - (want - ndef)),
               (size_t)(want - nargs) * sizeof *slot);
        return slot;
    }
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
    for (i = 0; i < want; i++) {
        if (slot[i] != NULL) continue;
        if (i < want - ndef) return NULL;  /* a required argument missing */
        slot[i] = PyTuple_GET_ITEM(f->defaults, i - (want - ndef));
    }
    return slot;
}

/* bind as a function of its own (decide() in Python binds a call as its routine does). */
PyObject *const *
bind_args(const Front *f, Py_ssize_t want, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
          PyObject **slot)
{
    return bind(f, want, args, nargs, kwnames, slot);
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
    PyObject *const *bound = bind(&self->front, self->nparams, args, PyVectorcall_NARGS(nargsf), kwnames, slot);
    if (bound != NULL) {
        PyObject *r = self->small(self, bound);
        if (r != Py_NotImplemented) return r;  /* the result, or an error */
        Py_DECREF(r);
    }
    return fall_back(&self->front, args, nargsf, kwnames);
}

/* A new routine object's common part: its path and its front (-1 with an exception; the caller then
 * drops the object). */
int
routine_init(Routine *self, PyObject *(*small)(Routine *, PyObject *const *), Py_ssize_t nparams,
             PyObject *fallback, PyObject *names, PyObject *defaults, const char *what)
{
    self->vectorcall = routine_vectorcall;
    self->small = small;
    self->nparams = nparams;
    return front_init(&self->front, fallback, names, defaults, nparams, what);
}

int
routine_traverse(Routine *self, visitproc visit, void *arg)
{
    return front_traverse(&self->front, visit, arg);
}

int
routine_clear(Routine *self)
{
    front_clear(&self->front);
    return 0;
}

void
routine_dealloc(Routine *self)
{
    PyObject_GC_UnTrack(self);
    front_clear(&self->front);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* "<tileblas.blas routine dgemm>" (the name update_wrapper copied from the fallback) */
PyObject *
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

PyMethodDef front_methods[] = {
    {"front", (PyCFunction)(void (*)(void))routine_front, METH_FASTCALL,
     "front(fallback, names, defaults): this path in front of the Python implementation fallback (its\n"
     "parameter names and defaults), as tileblas.blas hands the routine out (a new object)."},
    {"__reduce__", front_reduce, METH_NOARGS, "Pickled by reference: the module attribute __qualname__."},
    {NULL, NULL, 0, NULL},
};

PyGetSetDef front_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
