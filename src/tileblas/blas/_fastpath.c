/*
 * tileblas.blas._fastpath -- the small-call path of the drop-in routines: the module (its methods and its
 * import).  The path itself is in the files _fp.h lists: the front and binding (_fp_front.c), the arrays
 * (_fp_arrays.c), the configuration and decide() (_fp_decide.c), Level 3 in stages (_fp_level3.c) and
 * Level 1/2 (_fp_level12.c).
 *
 * Each public routine of tileblas.blas is a Level3 or Level12 object of this module with a front: called as
 * users call it, it binds the arguments to the routine's parameters here and, when the call is a common
 * one, does the whole call here: one validation, one native BLAS call on tileblas' OpenBLAS instance of the
 * path policy's thread count (or its parts on the thread pool), the result array returned.  Anything else
 * -- other types or dtypes, N-d or empty operands, shapes that do not fit, flag values out of range,
 * memory shared between the output and an input, calls at or above the flop limit where the path policy
 * tiles or recurses, a runtime other than the process default in force -- goes, as it was made, to the
 * Python implementation *before anything is written*: it raises the errors (naming the argument) and runs
 * the runtime.  (A bare object, made without a fallback, returns NotImplemented instead.)
 *
 * Module state, set from Python (tileblas.blas._dispatch, from tileblas.policy._dropin):
 *   configure(config)        everything the path reads, in one call, checked completely before anything
 *                            changes (_fp_decide.c lists the keys)
 *   config() -> dict         the configuration in force, as configure takes it
 *   decide(routine, *args, **kwargs) -> dict
 *                            the path routine(*args, **kwargs) would take (path, parts, entry, flops, why,
 *                            conjugate, copied), from the same stages, without running it
 *   stats() -> dict          split_calls, rank_gemm_calls
 *   decline(flag) -> previous
 *                            this thread's calls all take the Python path while set (the 64-bit-integer
 *                            functions of get_blas_funcs(ilp64=True): the paths here call 32-bit entry points)
 */
#define FP_IMPORT_ARRAY
#include "_fp.h"

const PoolAPI *pool_api = NULL;
#if defined(_MSC_VER)
__declspec(thread) int fp_declined = 0;
#else
_Thread_local int fp_declined = 0;
#endif
int fp_declining = 0; /* changed under the GIL */
PyObject *fp_small_int[3] = {NULL, NULL, NULL};

static PyObject *
set_decline(PyObject *mod, PyObject *flag)
{
    int on = PyObject_IsTrue(flag), was = fp_declined;
    (void)mod;
    if (on < 0) return NULL;
    fp_declining += (on != 0) - (was != 0);
    fp_declined = on != 0;
    return PyBool_FromLong(was);
}

static PyMethodDef methods[] = {
    {"configure", fp_configure, METH_O,
     "configure(config): set everything the small-call path reads, from a dict with exactly the keys of\n"
     "config() (tileblas.policy._dropin.DropInConfig's fields, the entry points, the pool slot, the\n"
     "instance's get_num_threads, enabled and the current-runtime contextvar); checked completely before\n"
     "anything changes, so a refused configuration changes nothing."},
    {"config", fp_config, METH_NOARGS, "The configuration in force, as configure() takes it."},
    {"decide", (PyCFunction)(void (*)(void))fp_decide_py, METH_FASTCALL | METH_KEYWORDS,
     "decide(routine, *args, **kwargs) -> dict: the path the Level-3 call routine(*args, **kwargs) takes\n"
     "(path: 'python', 'one_thread', 'instance', 'split' or 'rank_gemm'; parts; entry: the instance its BLAS\n"
     "calls run on; flops; why: for the Python path; conjugate; copied), from the stages the call runs,\n"
     "without running it."},
    {"stats", fp_stats, METH_NOARGS,
     "Counters: split_calls (calls run in parts on the pool), rank_gemm_calls (syrk/syr2k calls run as gemm)."},
    {"decline", set_decline, METH_O,
     "decline(flag) -> previous: while set, every call of this thread takes the Python path."},
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
    if (fp_arrays_init() < 0) return NULL;
    for (int i = 0; i < 3; i++)
        if (fp_small_int[i] == NULL && (fp_small_int[i] = PyLong_FromLong(i)) == NULL) return NULL;
    if (PyType_Ready(&Level3Type) < 0 || PyType_Ready(&Level12Type) < 0) return NULL;
    m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Level3", (PyObject *)&Level3Type) < 0
        || PyModule_AddObjectRef(m, "Level12", (PyObject *)&Level12Type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    pool_api = pool_api_import(); /* NULL: no pool in this build, calls are not split */
    return m;
}
