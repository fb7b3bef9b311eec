/*
 * tileblas.kernels._pool -- the threads that run OpenBLAS's parallel work for tileblas' instances.
 *
 * Why: an OpenBLAS thread pool keeps its idle workers spinning for about 0.1 s after every call (2**28
 * cycles; on x86-64 the spin is a run of NOPs that never yields).  NumPy, SciPy and tileblas each load
 * their own OpenBLAS, so a program that alternates their calls has two pools spinning at once: on a
 * machine with as many cores as threads, each call then waits for scheduler time slices held by the other
 * pool's spinning workers, and both run about ten times slower.  OpenBLAS fixes its spin time when it is
 * loaded; it cannot be changed afterwards.
 *
 * What: OpenBLAS (0.3.27 and later) hands the jobs of a parallel call to a callback where one is set
 * (openblas_set_threads_callback_function).  tileblas sets one for each of its multi-threaded instances,
 * and runs the jobs on the workers of this module: the calling thread runs job 0, one worker per other
 * job runs the rest, all at once (OpenBLAS's Level-3 jobs wait for one another, so they must run
 * concurrently).  A worker with no job spins, then sleeps on a condition variable:
 *   - it spins up to spin_ns (0.1 s, as OpenBLAS does) so that back-to-back calls start at once;
 *   - while spinning it watches for threads it keeps from running (another library's BLAS pool, the
 *     user's threads, another process): a clock gap longer than preempt_ns between two readings means the
 *     scheduler took its core; and every check_ns (Linux) it reads how many threads are runnable on the
 *     machine (/proc/loadavg): more than there are CPUs at two readings in a row means some thread waits
 *     for one.  Either way the worker sleeps at once.  Two such preemptions within confirm_ns mean
 *     the contention goes on (one alone may be the machine's noise): every worker then spins only
 *     polite_spin_ns (25 us: enough for the next call of a tight loop, short of the next foreign call)
 *     for a polite period of hold_ns (0.25 s), doubled, up to max_hold_ns (4 s), each time contention
 *     comes back within hold_ns of the end of the last period.
 * So a loop of tileblas calls keeps its workers hot, and a loop that mixes tileblas with NumPy or SciPy
 * leaves their pools the cores while they run.  The other way round, their pools' spinning threads hold
 * cores for 0.1 s after each of their calls, and a tileblas call made then would have its workers wait
 * for a core behind them (for whole scheduler slices: tens of times the call): crowded() tells the
 * callers (tileblas.blas's C path) to run such a call on the calling thread alone.
 *
 * Each instance has its own slot: a lock (one parallel call at a time per instance: OpenBLAS indexes its
 * per-thread buffers by job number, so two calls' jobs of one number must not overlap; OpenBLAS's own
 * pool serializes them the same way) and its own workers (threads - 1, made when the slot is attached,
 * more on demand).  After fork() the child has none of the workers; they are made again on its first
 * parallel call.
 *
 * Python API
 *   supported                      whether this build has the pool (POSIX threads)
 *   attach(setter, threads) -> int  set the callback through the library's setter (its address); makes
 *                                   threads - 1 workers; returns the slot number
 *   configure(spin_ns=, polite_spin_ns=, hold_ns=, max_hold_ns=, preempt_ns=, confirm_ns=, check_ns=)
 *                                   set (each optional, all checked before any is set); returns the
 *                                   settings
 *   stats() -> dict                 counters: calls, jobs, sleeps, wakes, preempted, contended (polite
 *                                   periods begun), crowded (calls told to run alone), workers, slots;
 *                                   polite (now), hold_ns (current), runnable_check (whether spinners
 *                                   read /proc/loadavg)
 *   crowded() -> bool               whether a parallel call now should run on the calling thread alone:
 *                                   during a polite period, the threads runnable besides the caller and
 *                                   the pool's spinning workers fill every other CPU (one /proc/loadavg
 *                                   reading; outside polite periods one clock reading).  The C fast path
 *                                   of tileblas.blas asks it through the capsule _api before each
 *                                   parallel-sized call and then uses the one-thread instance.
 *   _api                            capsule of the C API (struct PoolAPI): crowded(), and run(slot, ...)
 *                                   that runs tileblas' own jobs on a slot's workers
 *   polite(on)                      start a polite period now (as contention does; counted in contended),
 *                                   or end the one in force and forget past preemptions
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32) || defined(__STDC_NO_ATOMICS__)
#define POOL_SUPPORTED 0
#else
#define POOL_SUPPORTED 1
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#endif

#if POOL_SUPPORTED

typedef void (*dojob_fn)(int thread_num, void *jobdata, int dojob_data);
typedef void (*threads_cb)(int sync, dojob_fn dojob, int numjobs, size_t elsize, void *jobdata, int dojob_data);
typedef void (*set_cb_fn)(threads_cb callback);

#define MAX_SLOTS 32
#define MAX_JOBS 1024

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield" ::: "memory")
#else
#define CPU_RELAX() ((void)0)
#endif

enum { CMD_NONE = 0, CMD_JOB = 1 };

typedef struct Worker {
    _Atomic int cmd;    /* CMD_JOB once a job is posted; the worker puts CMD_NONE back before done */
    _Atomic int done;   /* 1 once the posted job has run */
    _Atomic int asleep; /* 1 while waiting on wake */
    dojob_fn fn;
    void *data;
    int index;
    int arg;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
} Worker;

typedef struct Slot {
    pthread_mutex_t lock; /* one parallel call at a time on this instance */
    int used;
    int nworkers;
    Worker *workers[MAX_JOBS];
} Slot;

static Slot slots[MAX_SLOTS];
static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int nslots = 0;

/* settings, in nanoseconds */
static _Atomic long long spin_ns = 100000000LL;      /* 0.1 s: OpenBLAS's own 2**28 cycles */
static _Atomic long long polite_spin_ns = 25000LL;   /* while polite */
static _Atomic long long hold_ns = 250000000LL;      /* first polite period */
static _Atomic long long max_hold_ns = 4000000000LL; /* longest polite period */
static _Atomic long long preempt_ns = 100000LL;      /* a clock gap this long while spinning = preempted */
static _Atomic long long confirm_ns = 200000000LL;   /* two preemptions this close = contention */
static _Atomic long long check_ns = 100000LL;        /* how often a spinner reads the runnable threads (0: never) */

static int loadavg_fd = -1; /* /proc/loadavg, where there is one */
static long cpus_online = 1;

/* state and counters */
static _Atomic long long polite_until = 0, last_preempt = -1000000000000LL, cur_hold = 0;
static _Atomic long long n_calls = 0, n_jobs = 0, n_sleeps = 0, n_wakes = 0, n_preempted = 0, n_contended = 0,
                         n_workers = 0, n_crowded = 0;
static _Atomic int n_spinning = 0; /* workers spinning now */

static inline long long
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline long long
spin_limit(long long t)
{
    return t < atomic_load_explicit(&polite_until, memory_order_relaxed)
               ? atomic_load_explicit(&polite_spin_ns, memory_order_relaxed)
               : atomic_load_explicit(&spin_ns, memory_order_relaxed);
}

/* Start a polite period at t: hold_ns, or twice the last one (up to max_hold_ns) where contention
 * comes back within hold_ns of the end of the last period. */
static void
note_contention(long long t)
{
    long long base = atomic_load_explicit(&hold_ns, memory_order_relaxed);
    long long top = atomic_load_explicit(&max_hold_ns, memory_order_relaxed);
    long long until = atomic_load_explicit(&polite_until, memory_order_relaxed);
    long long hold = atomic_load_explicit(&cur_hold, memory_order_relaxed);
    hold = (until > 0 && t < until + base && hold > 0) ? 2 * hold : base;
    if (hold > top)
        hold = top < base ? base : top;
    atomic_store_explicit(&cur_hold, hold, memory_order_relaxed);
    atomic_store_explicit(&polite_until, t + hold, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_contended, 1, memory_order_relaxed);
}

/* A worker found at t that it had been preempted while spinning. */
static void
note_preempted(long long t)
{
    atomic_fetch_add_explicit(&n_preempted, 1, memory_order_relaxed);
    long long prev = atomic_exchange_explicit(&last_preempt, t, memory_order_relaxed);
    if (t - prev <= atomic_load_explicit(&confirm_ns, memory_order_relaxed))
        note_contention(t);
}

/* Threads runnable on the machine now (the fourth field of /proc/loadavg, "runnable/total"), or -1. */
static long
runnable_now(void)
{
    char buf[160];
    if (loadavg_fd < 0)
        return -1;
    ssize_t k = pread(loadavg_fd, buf, sizeof buf - 1, 0);
    if (k <= 0)
        return -1;
    buf[k] = '\0';
    char *p = buf;
    for (int field = 0; field < 3; field++) {
        while (*p && *p != ' ')
            p++;
        while (*p == ' ')
            p++;
    }
    return strtol(p, NULL, 10);
}

/* Whether more threads are runnable than the machine has CPUs (the count includes the reader). */
static int
oversubscribed(void)
{
    return runnable_now() > cpus_online;
}

/* Whether a parallel call started now would find the other CPUs taken: while contention goes on (a polite
 * period), the threads runnable besides the caller and this pool's spinning workers fill every other CPU
 * (another library's spinning BLAS threads, say).  Its workers would wait for a core, so the call is
 * better run on the calling thread alone.  Costs one clock reading outside polite periods. */
static int
crowded(void)
{
    if (now_ns() >= atomic_load_explicit(&polite_until, memory_order_relaxed))
        return 0;
    long r = runnable_now();
    if (r < 0)
        return 0;
    int busy = r - atomic_load_explicit(&n_spinning, memory_order_relaxed) >= cpus_online;
    if (busy)
        atomic_fetch_add_explicit(&n_crowded, 1, memory_order_relaxed);
    return busy;
}

/* Spin until a job is posted, the spin limit passes, or the worker finds it keeps another thread from
 * running.  Returns 1 when a job is there. */
static int spin_loop(Worker *w);

static int
spin_for_job(Worker *w)
{
    atomic_fetch_add_explicit(&n_spinning, 1, memory_order_relaxed);
    int got = spin_loop(w);
    atomic_fetch_sub_explicit(&n_spinning, 1, memory_order_relaxed);
    return got;
}

static int
spin_loop(Worker *w)
{
    long long start = now_ns(), last = start;
    long long every = atomic_load_explicit(&check_ns, memory_order_relaxed);
    long long next_check = every > 0 ? start + every : -1;
    int seen = 0;
    for (;;) {
        for (int k = 0; k < 32; k++) {
            if (atomic_load_explicit(&w->cmd, memory_order_acquire) != CMD_NONE)
                return 1;
            CPU_RELAX();
        }
        long long t = now_ns();
        if (t - last > atomic_load_explicit(&preempt_ns, memory_order_relaxed)) {
            note_preempted(t);
            return atomic_load_explicit(&w->cmd, memory_order_acquire) != CMD_NONE;
        }
        last = t;
        if (next_check >= 0 && t >= next_check) {
            /* two readings in a row, check_ns apart: a thread that waits that long, not one passing by */
            if (!oversubscribed())
                seen = 0;
            else if (++seen >= 2) {
                note_preempted(t);
                return atomic_load_explicit(&w->cmd, memory_order_acquire) != CMD_NONE;
            }
            next_check = t + every;
        }
        if (t - start >= spin_limit(t))
            return atomic_load_explicit(&w->cmd, memory_order_acquire) != CMD_NONE;
    }
}

static void *
worker_main(void *arg)
{
    Worker *w = (Worker *)arg;
    int first = 1; /* a new worker sleeps until its first job: there is no call to keep it hot for */
#if defined(__linux__)
    pthread_setname_np(pthread_self(), "tileblas-pool"); /* as top, gdb and py-spy show it */
#endif
    for (;;) {
        if (first || !spin_for_job(w)) {
            first = 0;
            pthread_mutex_lock(&w->lock);
            atomic_store(&w->asleep, 1); /* seq_cst: pairs with the poster's store of cmd, then load of asleep */
            atomic_fetch_add_explicit(&n_sleeps, 1, memory_order_relaxed);
            while (atomic_load(&w->cmd) == CMD_NONE)
                pthread_cond_wait(&w->wake, &w->lock);
            atomic_store(&w->asleep, 0);
            pthread_mutex_unlock(&w->lock);
        }
        w->fn(w->index, w->data, w->arg);
        atomic_store_explicit(&w->cmd, CMD_NONE, memory_order_relaxed);
        atomic_store_explicit(&w->done, 1, memory_order_release);
    }
    return NULL;
}

static Worker *
worker_new(void)
{
    Worker *w = (Worker *)calloc(1, sizeof(Worker));
    if (w == NULL)
        return NULL;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    atomic_store(&w->done, 1);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&w->thread, &attr, worker_main, w);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
    }
    atomic_fetch_add_explicit(&n_workers, 1, memory_order_relaxed);
    return w;
}

/* Make sure the slot has n workers (called with the slot's lock held).  0 or -1. */
static int
ensure_workers(Slot *s, int n)
{
    while (s->nworkers < n) {
        Worker *w = worker_new();
        if (w == NULL)
            return -1;
        s->workers[s->nworkers++] = w;
    }
    return 0;
}

static inline void
post(Worker *w, dojob_fn fn, int index, void *data, int arg)
{
    w->fn = fn;
    w->index = index;
    w->data = data;
    w->arg = arg;
    atomic_store_explicit(&w->done, 0, memory_order_relaxed);
    atomic_store(&w->cmd, CMD_JOB); /* seq_cst */
    if (atomic_load(&w->asleep)) {
        pthread_mutex_lock(&w->lock);
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->lock);
        atomic_fetch_add_explicit(&n_wakes, 1, memory_order_relaxed);
    }
}

/* Wait for a worker's job: spin; after a long wait, yield now and then (a descheduled worker may be
 * queued on this core). */
static inline void
wait_done(Worker *w)
{
    unsigned spins = 0;
    long long start = 0;
    while (!atomic_load_explicit(&w->done, memory_order_acquire)) {
        CPU_RELAX();
        if (++spins == 1024) {
            spins = 0;
            long long t = now_ns();
            if (start == 0)
                start = t;
            else if (t - start > 1000000LL)
                sched_yield();
        }
    }
}

static void
run_jobs(Slot *s, dojob_fn dojob, int numjobs, size_t elsize, void *jobdata, int arg)
{
    if (numjobs <= 1) {
        if (numjobs == 1)
            dojob(0, jobdata, arg);
        return;
    }
    pthread_mutex_lock(&s->lock);
    if (numjobs > MAX_JOBS || ensure_workers(s, numjobs - 1) != 0) {
        /* The jobs must run at once (Level-3 jobs wait for one another): running them one after the
         * other could hang, so stop with a message instead. */
        fprintf(stderr, "tileblas: cannot start %d threads for an OpenBLAS call; set TILEBLAS_POOL=0 or "
                        "fewer threads\n", numjobs - 1);
        abort();
    }
    atomic_fetch_add_explicit(&n_calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_jobs, numjobs, memory_order_relaxed);
    char *base = (char *)jobdata;
    for (int i = 1; i < numjobs; i++)
        post(s->workers[i - 1], dojob, i, base + (size_t)i * elsize, arg);
    dojob(0, jobdata, arg);
    for (int i = 1; i < numjobs; i++)
        wait_done(s->workers[i - 1]);
    pthread_mutex_unlock(&s->lock);
}

#define TRAMPOLINE(k)                                                                                  \
    static void tramp_##k(int sync, dojob_fn d, int n, size_t e, void *j, int a)                       \
    {                                                                                                  \
        (void)sync;                                                                                    \
        run_jobs(&slots[k], d, n, e, j, a);                                                            \
    }
TRAMPOLINE(0) TRAMPOLINE(1) TRAMPOLINE(2) TRAMPOLINE(3) TRAMPOLINE(4) TRAMPOLINE(5) TRAMPOLINE(6)
TRAMPOLINE(7) TRAMPOLINE(8) TRAMPOLINE(9) TRAMPOLINE(10) TRAMPOLINE(11) TRAMPOLINE(12) TRAMPOLINE(13)
TRAMPOLINE(14) TRAMPOLINE(15) TRAMPOLINE(16) TRAMPOLINE(17) TRAMPOLINE(18) TRAMPOLINE(19) TRAMPOLINE(20)
TRAMPOLINE(21) TRAMPOLINE(22) TRAMPOLINE(23) TRAMPOLINE(24) TRAMPOLINE(25) TRAMPOLINE(26) TRAMPOLINE(27)
TRAMPOLINE(28) TRAMPOLINE(29) TRAMPOLINE(30) TRAMPOLINE(31)

static const threads_cb trampolines[MAX_SLOTS] = {
    tramp_0,  tramp_1,  tramp_2,  tramp_3,  tramp_4,  tramp_5,  tramp_6,  tramp_7,
    tramp_8,  tramp_9,  tramp_10, tramp_11, tramp_12, tramp_13, tramp_14, tramp_15,
    tramp_16, tramp_17, tramp_18, tramp_19, tramp_20, tramp_21, tramp_22, tramp_23,
    tramp_24, tramp_25, tramp_26, tramp_27, tramp_28, tramp_29, tramp_30, tramp_31,
};

/* In a child after fork() the workers do not exist: forget them (their memory is left), make the
 * locks usable again; the first parallel call makes new workers. */
static void
after_fork_child(void)
{
    int n = atomic_load(&nslots);
    for (int k = 0; k < n; k++) {
        pthread_mutex_init(&slots[k].lock, NULL);
        slots[k].nworkers = 0;
    }
    pthread_mutex_init(&attach_lock, NULL);
    atomic_store(&n_workers, 0);
    atomic_store(&n_spinning, 0);
}

#endif /* POOL_SUPPORTED */

/* ------------------------------------------------------------------------------------------------- */

static PyObject *
pool_attach(PyObject *self, PyObject *args)
{
    unsigned long long setter;
    int threads;
    if (!PyArg_ParseTuple(args, "Ki:attach", &setter, &threads))
        return NULL;
#if POOL_SUPPORTED
    if (setter == 0) {
        PyErr_SetString(PyExc_ValueError, "attach: setter is 0, not the address of "
                                          "openblas_set_threads_callback_function");
        return NULL;
    }
    if (threads < 1 || threads > MAX_JOBS) {
        PyErr_Format(PyExc_ValueError, "attach: threads is %d, not between 1 and %d", threads, MAX_JOBS);
        return NULL;
    }
    int k, failed = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&attach_lock);
    k = atomic_load(&nslots);
    if (k < MAX_SLOTS) {
        Slot *s = &slots[k];
        pthread_mutex_init(&s->lock, NULL);
        s->nworkers = 0;
        s->used = 1;
        if (ensure_workers(s, threads - 1) != 0)
            failed = 1;
        else {
            ((set_cb_fn)(uintptr_t)setter)(trampolines[k]);
            atomic_store(&nslots, k + 1);
        }
    }
    pthread_mutex_unlock(&attach_lock);
    Py_END_ALLOW_THREADS
    if (k >= MAX_SLOTS) {
        PyErr_Format(PyExc_RuntimeError, "attach: all %d pool slots are in use", MAX_SLOTS);
        return NULL;
    }
    if (failed) {
        PyErr_Format(PyExc_RuntimeError, "attach: could not start %d worker threads", threads - 1);
        return NULL;
    }
    return PyLong_FromLong(k);
#else
    (void)setter;
    (void)threads;
    PyErr_SetString(PyExc_RuntimeError, "attach: this build of tileblas has no thread pool");
    return NULL;
#endif
}

#if POOL_SUPPORTED
static int
set_setting(PyObject *value, const char *name, _Atomic long long *target)
{
    if (value == NULL || value == Py_None)
        return 0;
    long long v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 0) {
        PyErr_Format(PyExc_ValueError, "configure: %s is %lld; it must be >= 0 (nanoseconds)", name, v);
        return -1;
    }
    atomic_store(target, v);
    return 0;
}
#endif

static PyObject *
settings_dict(void)
{
#if POOL_SUPPORTED
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:L,s:L}", "spin_ns", (long long)atomic_load(&spin_ns),
                         "polite_spin_ns", (long long)atomic_load(&polite_spin_ns), "hold_ns",
                         (long long)atomic_load(&hold_ns), "max_hold_ns", (long long)atomic_load(&max_hold_ns),
                         "preempt_ns", (long long)atomic_load(&preempt_ns), "confirm_ns",
                         (long long)atomic_load(&confirm_ns), "check_ns", (long long)atomic_load(&check_ns));
#else
    return PyDict_New();
#endif
}

static PyObject *
pool_configure(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"spin_ns", "polite_spin_ns", "hold_ns", "max_hold_ns", "preempt_ns", "confirm_ns",
                             "check_ns", NULL};
    PyObject *vals[7] = {NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOOOOO:configure", kwlist, &vals[0], &vals[1], &vals[2],
                                     &vals[3], &vals[4], &vals[5], &vals[6]))
        return NULL;
#if POOL_SUPPORTED
    /* check all before setting any, so a bad value leaves the settings as they were */
    for (int i = 0; i < 7; i++) {
        if (vals[i] == NULL || vals[i] == Py_None)
            continue;
        if (!PyLong_Check(vals[i])) {
            PyErr_Format(PyExc_TypeError, "configure: %s must be an int (nanoseconds); got %R", kwlist[i],
                         vals[i]);
            return NULL;
        }
        long long v = PyLong_AsLongLong(vals[i]);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        if (v < 0) {
            PyErr_Format(PyExc_ValueError, "configure: %s is %lld; it must be >= 0 (nanoseconds)",
                         kwlist[i], v);
            return NULL;
        }
    }
    _Atomic long long *targets[7] = {&spin_ns,    &polite_spin_ns, &hold_ns, &max_hold_ns,
                                     &preempt_ns, &confirm_ns,     &check_ns};
    for (int i = 0; i < 7; i++)
        if (set_setting(vals[i], kwlist[i], targets[i]))
            return NULL;
#endif
    return settings_dict();
}

static PyObject *
pool_stats(PyObject *self, PyObject *unused)
{
#if POOL_SUPPORTED
    long long t = now_ns();
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:i,s:O,s:L,s:O,s:L}", "calls", (long long)atomic_load(&n_calls),
                         "jobs", (long long)atomic_load(&n_jobs), "sleeps", (long long)atomic_load(&n_sleeps),
                         "wakes", (long long)atomic_load(&n_wakes), "preempted", (long long)atomic_load(&n_preempted),
                         "contended", (long long)atomic_load(&n_contended), "workers",
                         (long long)atomic_load(&n_workers), "slots", (int)atomic_load(&nslots), "polite",
                         t < atomic_load(&polite_until) ? Py_True : Py_False, "hold_ns",
                         (long long)atomic_load(&cur_hold), "runnable_check", loadavg_fd >= 0 ? Py_True : Py_False, "crowded",
                         (long long)atomic_load(&n_crowded));
#else
    return PyDict_New();
#endif
}

static PyObject *
pool_polite(PyObject *self, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
#if POOL_SUPPORTED
    if (on)
        note_contention(now_ns());
    else {
        atomic_store(&polite_until, 0);
        atomic_store(&cur_hold, 0);
        atomic_store(&last_preempt, -1000000000000LL);
    }
#endif
    Py_RETURN_NONE;
}

static PyObject *
pool_crowded(PyObject *self, PyObject *unused)
{
#if POOL_SUPPORTED
    if (crowded())
        Py_RETURN_TRUE;
#endif
    Py_RETURN_FALSE;
}

#if POOL_SUPPORTED
/* Run numjobs jobs at once on the workers of slot `slot` (the caller runs job 0), as for the OpenBLAS
 * instance of that slot, and under its lock: tileblas' own parallel work (jobs that call the one-thread
 * instance).  -1 where there is no such slot. */
static int
pool_run(int slot, dojob_fn dojob, int numjobs, size_t elsize, void *jobdata, int arg)
{
    if (slot < 0 || slot >= atomic_load(&nslots))
        return -1;
    run_jobs(&slots[slot], dojob, numjobs, elsize, jobdata, arg);
    return 0;
}

/* The C API other modules of tileblas import (tileblas.blas._fastpath), in a capsule named
 * "tileblas.kernels._pool._api"; its users declare the same struct. */
typedef struct PoolAPI {
    int (*crowded)(void);
    int (*run)(int slot, dojob_fn dojob, int numjobs, size_t elsize, void *jobdata, int arg);
} PoolAPI;
static const PoolAPI pool_api = {crowded, pool_run};
#endif

static PyMethodDef methods[] = {
    {"attach", pool_attach, METH_VARARGS,
     "attach(setter, threads) -> slot: run the parallel jobs of the OpenBLAS whose "
     "openblas_set_threads_callback_function is at address setter on this pool"},
    {"configure", (PyCFunction)(void (*)(void))pool_configure, METH_VARARGS | METH_KEYWORDS,
     "configure(*, spin_ns=None, polite_spin_ns=None, hold_ns=None, max_hold_ns=None, preempt_ns=None, "
     "confirm_ns=None, check_ns=None) -> settings"},
    {"stats", pool_stats, METH_NOARGS, "stats() -> counters of the pool"},
    {"crowded", pool_crowded, METH_NOARGS,
     "crowded() -> bool: whether a parallel call now should run on the calling thread alone (contention goes "
     "on and other threads fill the other CPUs)"},
    {"polite", pool_polite, METH_O, "polite(on): start a polite period now (as after a preemption), or end it and forget past preemptions"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pool", "The threads that run OpenBLAS's parallel jobs for tileblas' instances.",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__pool(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
#if POOL_SUPPORTED
    static int registered = 0;
    if (!registered) {
        pthread_atfork(NULL, NULL, after_fork_child);
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        cpus_online = n > 0 ? n : 1;
#ifdef __linux__
        loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
#endif
        registered = 1;
    }
#endif
    if (PyModule_AddIntConstant(m, "supported", POOL_SUPPORTED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
#if POOL_SUPPORTED
    PyObject *cap = PyCapsule_New((void *)&pool_api, "tileblas.kernels._pool._api", NULL);
    if (cap == NULL || PyModule_AddObject(m, "_api", cap) < 0) {
        Py_XDECREF(cap);
        Py_DECREF(m);
        return NULL;
    }
#endif
    return m;
}
