/*
 * tileblas.kernels._pool's C API: what other compiled modules of tileblas (tileblas.blas._fastpath,
 * tileblas.kernels._native, tileblas.rblas._guard) take from the capsule POOL_CAPSULE, through
 * pool_api_import.  Declared here once; _pool.c fills it, its users include this header.
 */
#ifndef TILEBLAS_POOL_H
#define TILEBLAS_POOL_H

#include <stddef.h>

#define POOL_CAPSULE "tileblas.kernels._pool._api"
#define POOL_API_VERSION 4

/* One part of a batch (or one job of an OpenBLAS parallel call): index, its data, an argument. */
typedef void (*pool_job_fn)(int index, void *data, int arg);

typedef struct PoolAPI {
    int version; /* POOL_API_VERSION */
    /* Run the nparts independent parts part(i, data + i * elsize, 0), i = 0 .. nparts - 1, on the calling
     * thread and the workers of slot `slot`: each part is claimed by whichever thread comes first, the
     * calling thread claiming parts until none is left, then waiting for those that workers took.  What
     * each part computes is fixed by the caller; only which thread runs it depends on the moment (where
     * the slot is busy with another call, or has no workers, the calling thread runs them all, one after
     * the other).  Workers that sleep are woken only where `wake` is set: waking one costs the calling
     * thread a system call and often its core for a while (the kernel runs the woken thread there first),
     * more than a short call gains from it; a worker left asleep runs no part of this call.  Returns how
     * many parts the calling thread ran, or -1 (nothing run) where there is no such slot. */
    int (*run_parts)(int slot, pool_job_fn part, int nparts, size_t elsize, void *data, int wake);
    /* The threads of slot `slot` (its workers and the caller), or -1 where there is no such slot. */
    int (*threads)(int slot);
    /* Around every BLAS call tileblas makes without the GIL: fork() (and the interpreter's exit) wait
     * until none is in flight, so that no lock or buffer of an OpenBLAS instance is held by a thread
     * that is gone (the child) or freed under a running call (exit).  enter() waits while they wait. */
    void (*enter)(void);
    void (*leave)(void);
} PoolAPI;

/* The pool's API, for a module's init (its includer has included Python.h): taken from the module's
 * attribute, not by PyCapsule_Import, whose path goes through the package's attributes, not yet set while
 * the package imports its modules.  NULL, with no error set, where this build has no pool or the pool is
 * of another build (another version): the caller then goes without it. */
static inline const PoolAPI *
pool_api_import(void)
{
    const PoolAPI *api = NULL;
    PyObject *pool = PyImport_ImportModule("tileblas.kernels._pool"), *cap = NULL;
    if (pool != NULL) cap = PyObject_GetAttrString(pool, "_api");
    if (cap != NULL) api = (const PoolAPI *)PyCapsule_GetPointer(cap, POOL_CAPSULE);
    Py_XDECREF(cap);
    Py_XDECREF(pool);
    if (api == NULL)
        PyErr_Clear();
    else if (api->version != POOL_API_VERSION)
        api = NULL;
    return api;
}

#endif
