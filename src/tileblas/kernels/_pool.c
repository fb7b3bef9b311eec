/*
 * tileblas.kernels._pool -- the threads that run the parallel work of tileblas' OpenBLAS instances.
 *
 * Two kinds of work, one set of workers per instance (a slot):
 *
 *   Parts (tileblas' own split of a call, tileblas.blas's C path).  A call cut into independent parts,
 *   each one call on the one-thread instance, fixed by the call alone.  The parts are *claimed*: the
 *   calling thread and every worker take the next unclaimed part until none is left, so the calling
 *   thread never waits for a worker that has not started (asleep, descheduled, on a crowded machine), it
 *   runs that part itself; it waits only for parts a worker is running.  Where the slot is busy with
 *   another thread's call, or has no workers, the calling thread runs every part, one after the other.
 *   What a part computes never depends on which thread runs it, so the result of a call is the same bits
 *   whatever the machine is doing (docs/guide/drop-in.md, "Same call, same bits"; how:
 *   docs/developer/drop-in-internals.md, "Same call, same bits: how").
 *
 *   Jobs (OpenBLAS's own parallel calls).  OpenBLAS (0.3.27 and later) hands the jobs of a parallel call
 *   to a callback where one is set (openblas_set_threads_callback_function); tileblas sets one for each
 *   multi-threaded instance and runs job 0 on the calling thread, job i on worker i - 1, all at once
 *   (OpenBLAS's Level-3 jobs wait for one another, so they must run concurrently).  OpenBLAS partitions
 *   such a call by its shape and thread count alone, so these too give the same bits every time.
 *
 * Waiting for work.  A worker with nothing to do spins spin_ns (200 us: the next call of a loop starts at
 * once), then sleeps on a condition variable until it is told of work.  The spin is a busy wait, not a
 * loop of sched_yield(): a yielding worker sharing a core with a busy thread (another process, another
 * library's spinning threads) gives it whole time slices and then answers late (dgemm of order 128 in a
 * loop of tileblas calls alone took 97 us yielding, 53 us spinning; after SciPy calls or beside a busy
 * process tileblas lost 0.5-0.8x to SciPy yielding, 0.9-2.3x ahead spinning 200 us then sleeping, while
 * a woken sleeper is scheduled promptly).  Spinning 200 us, not OpenBLAS's 100 ms, it holds a core from
 * another thread for at most that long after a call.  A thread waiting for the parts or jobs of others
 * spins as long, then sleeps until the thread that finishes them tells it: its CPU is then free for the
 * thread it waits for, queued behind it, or sharing another CPU with other work, and lent to it: moved
 * onto that CPU until its work is done (lend_cpu; the kernel seldom moves it there by itself within a
 * call).  Where the user asks for a longer wait (TILEBLAS_POOL_WAIT, set
 * from Python), an idle worker yields (sched_yield) in a loop for yield_ns after its spin, as OpenBLAS's
 * threads do, and then sleeps: loops with the caller's own work between calls find it awake, at the
 * cost of the CPU it holds meanwhile from another library's threads.  While a worker sleeps, its watcher,
 * a thread of the idle scheduling class, looks for work posted to it for watch_ns (100 ms, as long as
 * OpenBLAS's threads stay awake) and wakes it: a sleeper's wake is then not the calling thread's cost
 * (watcher_main).  Nothing is decided from timings, and the moment only chooses which thread runs a part
 * and where: the one state of the machine read is whether no CPU idles, when a lent worker gives its CPU
 * back (machine_crowded, give_back_cpu).
 *
 * Where a worker wakes: the kernel often puts a woken thread on the CPU of the thread that woke it, where
 * it waits for that thread's time slice (1-4 ms) while the other CPU idles.  So a worker about to sleep
 * leaves the CPU of its slot's last calling thread out of its CPU mask, and puts it back when it wakes
 * (sleep_off, wake_on): the calling thread, usually on the same CPU call after call, then wakes it onto
 * another CPU, at once where one idles.  A worker that still finds itself on the calling thread's CPU when
 * it starts to work (woken from its spin, or the calling thread moved) moves off it (step_aside).  With
 * claimed parts the calling thread never waits for a worker's wake-up: it goes on with the parts, and the
 * worker joins when it runs.  OpenBLAS's jobs cannot be claimed (they wait for one another), so there the
 * calling thread yields once for each worker it woke that may be queued behind it, then runs job 0 while
 * the others wake.  The figures: docs/developer/drop-in-internals.md, "tileblas' pool".
 *
 * Each slot has a lock (one call at a time per instance: OpenBLAS indexes its per-thread buffers by job
 * number, so two calls' jobs of one number must not overlap; parts take the lock only to be claimed by
 * the slot's workers).
 *
 * Calls in flight.  Every BLAS call tileblas makes without the GIL is counted (enter/leave in the C API).
 * fork() waits until none is in flight, so that the child inherits no lock of an OpenBLAS instance held
 * by a thread it does not have (OpenBLAS holds one through each threaded Level-3 call: a child forked in
 * the middle of one hung on its first parallel call); meanwhile new calls wait.  The wait must come
 * before OpenBLAS's own fork handler, which shuts its server threads down and frees the buffers of its
 * threads' jobs (a parallel call in flight on the pool uses them): fork() runs the handlers registered
 * last first, and each instance's OpenBLAS registers its handler when it loads, so the pool registers
 * its handlers again each time it attaches an instance.  Registered after, the parent once hung in
 * OpenBLAS's handler, joining a server thread that never woke, while another thread's parallel call was
 * in flight.  After fork() the child
 * has none of the workers: split calls run on the calling thread, and OpenBLAS's parallel calls make
 * new workers.  quiesce(), called at the interpreter's exit, waits the same way and leaves calls waiting
 * for good, so that no daemon thread is inside a call when the libraries' destructors free their buffers
 * (a daemon thread in a parallel dgemm at exit ended the process with SIGSEGV).
 *
 * Python API
 *   supported                      whether this build has the pool (POSIX threads)
 *   attach(setter, threads) -> int  set the callback through the library's setter (its address); makes
 *                                   threads - 1 workers; returns the slot number
 *   configure(spin_ns=, yield_ns=, worker_delay_ns=, watch_ns=, give_back_delay_ns=)
 *                                   set (each optional, all checked before any is set); returns the
 *                                   settings.  yield_ns: an idle worker's yielding wait after its spin
 *                                   (0; TILEBLAS_POOL_WAIT sets it).  worker_delay_ns: each worker waits
 *                                   this long before it claims a part (0; for tests that force the
 *                                   calling thread to run them).  watch_ns: how long a sleeping worker's
 *                                   watcher looks for its work (100 ms; 0: no watch; TILEBLAS_POOL_WATCH).
 *                                   give_back_delay_ns: a worker lent a CPU waits this long after it
 *                                   said its work is done before it gives the CPU back (0; for tests)
 *   warm(alloc, release, count, bytes) -> bool
 *                                   on a thread of its own, take count buffers at once through the
 *                                   OpenBLAS function at address alloc, write a byte on each page of
 *                                   their first bytes, give them back through release (the first calls'
 *                                   page faults, before them: "Warming the buffers"); whether it started
 *   stats() -> dict                 counters: calls and jobs (OpenBLAS's parallel calls), batches and
 *                                   parts (tileblas' claimed parts), caller_parts (those the calling
 *                                   thread ran), alone (batches the calling thread ran by itself: slot
 *                                   busy or no workers), sleeps, wakes, unwoken (sleeping workers a short
 *                                   batch left asleep), waits_asleep (calling threads that slept waiting
 *                                   for others' parts or jobs), lent (workers such a thread moved onto
 *                                   its CPU: lend_cpu), moved (workers that stepped off the calling
 *                                   thread's CPU: step_aside), left (wakes a calling thread left to a
 *                                   watcher), watch_wakes (wakes by watchers), woke (workers that woke
 *                                   from sleep to work), wake_ns and wake_max_ns (the sum and the longest
 *                                   of their times from the post to running), tail_ns (the time calling
 *                                   threads waited for the workers after their own job or parts),
 *                                   workers, slots, spinning (now), warmed (buffers warm() wrote whole),
 *                                   warming (warm-ups running now)
 *   hold(slot, on)                  take (on) or give back the slot's lock from this thread: while held,
 *                                   other threads' batches on it run on their calling thread alone (tests)
 *   quiesce(timeout_s) -> bool      wait (up to timeout_s) until no call is in flight and let none start
 *                                   again (at the interpreter's exit); whether none was left in flight
 *   in_flight() -> int              BLAS calls without the GIL in flight now
 *   run_parts(slot, nparts, spin_ns=0, wake=True) -> list
 *                                   run nparts parts that each spin spin_ns and record which thread ran
 *                                   them: [(index, 0 caller / 1 worker)] (tests)
 *   _api                            capsule of the C API (struct PoolAPI, _pool.h)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_pool.h"

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
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#endif

#if POOL_SUPPORTED

typedef void (*dojob_fn)(int thread_num, void *jobdata, int dojob_data);
typedef void (*threads_cb)(int sync, dojob_fn dojob, int numjobs, size_t elsize, void *jobdata, int dojob_data);
typedef void (*set_cb_fn)(threads_cb callback);

#define MAX_SLOTS 32
#define MAX_JOBS 1024
#define MAX_PARTS 0xffff

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield" ::: "memory")
#else
#define CPU_RELAX() ((void)0)
#endif

enum { CMD_NONE = 0, CMD_JOB = 1 };

struct Slot;

typedef struct Worker {
    _Atomic int cmd;                 /* CMD_JOB once an OpenBLAS job is posted; CMD_NONE again before done */
    _Atomic int done;                /* 1 once the posted job has run */
    _Atomic int started;             /* 1 once the worker has taken the posted job (on its own CPU) */
    _Atomic int asleep;              /* 1 while waiting on wake */
    _Atomic unsigned long long told; /* batches of parts the worker was told of */
    unsigned long long seen;         /* ... and has looked at (the worker's own) */
    dojob_fn fn;
    void *data;
    int index;
    int arg;
    struct Slot *slot;
#if !defined(__linux__)
    pthread_mutex_t lock;            /* where there is no futex: its sleep's lock and condition */
    pthread_cond_t wake;
#endif
    pthread_t thread;
    int off_cpu;                     /* asleep: the CPU it may not be woken onto (-1: none); its own */
#if defined(__linux__)
    cpu_set_t mask;                  /* its CPU mask before it left off_cpu out (restored on waking) */
    _Atomic int tid;                 /* its thread id (0 until it runs): lend_cpu moves it by this */
    /* while it runs a part or a job (working), a calling thread that waits for it may move it onto its own
     * CPU (lent_cpu, -1: none; its mask before in lend_mask); the worker puts the mask back when that work
     * is done */
    pthread_mutex_t lend_lock;
    int working, lent_cpu;
    cpu_set_t lend_mask;
#endif
    /* its watcher: a thread of the idle scheduling class that, while the worker sleeps, looks for work
     * posted to it and wakes it, so that the calling thread need not (watcher_main) */
    pthread_t watcher;
    _Atomic int has_watcher;
    _Atomic int watch_seq;           /* raised to wake the watcher (a futex) */
    _Atomic int watching;            /* 1 while the watcher looks (awake, until watch_until) */
    _Atomic long long watch_until;
    _Atomic long long beat;          /* the watcher's clock at its last look */
    _Atomic int by_watch;            /* 1 when its watcher woke it (its CPU was otherwise idle) */
} Worker;

typedef struct Slot {
    pthread_mutex_t lock; /* one call at a time on this instance */
    int used;
    int threads;          /* the instance's thread count */
    int nworkers;
    Worker *workers[MAX_JOBS];
    /* the batch of parts in progress: claim = generation << 32 | parts << 16 | next part.  The fields of
     * a batch are written before its claim word and stay until all its parts are done; a thread that
     * claims part i by compare-and-swap on the word it read knows the fields it read are that batch's. */
    _Atomic unsigned long long claim;
    _Atomic uintptr_t part_fn, part_data;
    _Atomic size_t part_elsize;
    _Atomic int parts_done;
    unsigned long long generation;
    _Atomic int caller_cpu; /* the CPU the calling thread of the call in progress was on (-1: unknown) */
    _Atomic long long posted; /* the clock when the calling thread last posted work (wake_ns counts from it) */
    /* the calling thread asleep in wait_until (waiting 1), told by the thread that finishes the work */
    pthread_mutex_t wlock;
    pthread_cond_t wcond;
    _Atomic int waiting;
} Slot;

static Slot slots[MAX_SLOTS];
static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int nslots = 0;

/* settings, in nanoseconds */
static _Atomic long long spin_ns = 200000LL;    /* idle spin before sleeping; a waiter's spin before it sleeps */
static _Atomic long long yield_ns = 0LL;        /* after the idle spin, a worker's yielding wait before it sleeps */
static _Atomic long long worker_delay_ns = 0LL; /* tests: a worker's wait before it claims a part */
static _Atomic long long give_back_delay_ns = 0LL; /* tests: a lent worker's wait before give_back_cpu */
static _Atomic long long watch_ns = 100000000LL; /* how long a sleeping worker's watcher looks for its work */

/* A watcher whose last look is older than this is not on a CPU now: the calling thread wakes the worker. */
#define BEAT_NS 20000LL
/* How long the calling thread of OpenBLAS's jobs lets a watcher wake a worker before it wakes it. */
#define WATCH_GRACE_NS 50000LL

/* counters */
static _Atomic long long n_calls = 0, n_jobs = 0, n_batches = 0, n_parts = 0, n_caller_parts = 0, n_alone = 0,
                         n_sleeps = 0, n_wakes = 0, n_workers = 0, n_moved = 0, n_unwoken = 0,
                         n_waits_asleep = 0, n_left = 0, n_watch_wakes = 0, n_woke = 0, n_wake_ns = 0,
                         n_wake_max_ns = 0, n_tail_ns = 0, n_lent = 0;
static _Atomic int n_spinning = 0;
static _Atomic long long n_warmed = 0; /* buffers warmed (warm) */
static _Atomic int n_warming = 0;      /* warm-ups running now */
static _Atomic int warm_stop = 0;      /* 1: a call wants the CPU and the buffers: the warm-up ends at once */
static _Atomic int warm_holding = 0;   /* warm-ups past calls_enter() that may hold buffers */

static inline long long
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void
pause_for(long long ns)
{
    long long end = now_ns() + ns;
    while (now_ns() < end) {
        for (int k = 0; k < 64; k++)
            CPU_RELAX();
    }
}

/* The CPU the calling thread runs on, or -1. */
static inline int
this_cpu(void)
{
#if defined(__linux__)
    return sched_getcpu();
#else
    return -1;
#endif
}

#if defined(__linux__)
/* Move thread tid (0: this one) off `cpu` at once: its CPU mask `mask` without that CPU, then `mask` (the
 * kernel moves a thread at once when its CPU leaves its mask).  1 when moved; 0 where `mask` has no other
 * CPU or the move was refused. */
static int
move_off(pid_t tid, const cpu_set_t *mask, int cpu)
{
    cpu_set_t other = *mask;
    CPU_CLR(cpu, &other);
    if (CPU_COUNT(&other) == 0 || sched_setaffinity(tid, sizeof other, &other) != 0)
        return 0;
    sched_setaffinity(tid, sizeof *mask, mask);
    return 1;
}
#endif

/* A worker about to work that finds itself on the CPU of the call's calling thread moves to another CPU
 * it may run on (move_off): there it would only take turns with the thread it is to work beside, while
 * another CPU may idle (the kernel often wakes a thread on the CPU of the thread that woke it). */
static void
step_aside(int cpu)
{
#if defined(__linux__)
    cpu_set_t mask;
    if (cpu < 0 || sched_getcpu() != cpu)
        return;
    if (sched_getaffinity(0, sizeof mask, &mask) != 0 || !CPU_ISSET(cpu, &mask))
        return;
    if (move_off(0, &mask, cpu))
        atomic_fetch_add_explicit(&n_moved, 1, memory_order_relaxed);
#else
    (void)cpu;
#endif
}

/* Before w sleeps: leave `cpu` (the CPU of the slot's last calling thread, which is likely to wake it
 * next) out of its CPU mask, so that the kernel wakes it on another CPU (at once, where one idles) instead
 * of behind the thread that woke it; off_cpu says so.  Nothing where cpu is unknown or its only CPU. */
static void
sleep_off(Worker *w, int cpu)
{
    w->off_cpu = -1;
#if defined(__linux__)
    cpu_set_t off;
    if (cpu < 0 || sched_getaffinity(0, sizeof w->mask, &w->mask) != 0 || !CPU_ISSET(cpu, &w->mask)
        || CPU_COUNT(&w->mask) < 2)
        return;
    off = w->mask;
    CPU_CLR(cpu, &off);
    if (sched_setaffinity(0, sizeof off, &off) == 0)
        w->off_cpu = cpu;
#else
    (void)cpu;
#endif
}

/* After w wakes: its CPU mask as it was before sleep_off.  A worker its watcher woke does this after its
 * work instead of before (worker_main): a watcher runs only where a CPU is otherwise idle, so the worker
 * it wakes has an idle CPU to itself, and the system call (several us on a virtual machine) is not in
 * the way of the calling thread, which waits for its part.  The calling thread or another thread that
 * woke it may find it busy (under load, where the watcher does not run): that worker gets its whole mask
 * back at once, so the scheduler may move it to the calling thread's CPU. */
static void
wake_on(Worker *w)
{
#if defined(__linux__)
    if (w->off_cpu >= 0)
        sched_setaffinity(0, sizeof w->mask, &w->mask);
#endif
    w->off_cpu = -1;
}

/* Around each part or job a worker runs: while it works, a calling thread that waits for it may lend it
 * its CPU (lend_cpu).  A worker that was lent one says its work is done while still there (work_end,
 * then the done count and notify_waiter), and only then gets its CPU mask back and moves off that CPU
 * (give_back_cpu): the calling thread, told, wakes on that CPU and runs as soon as the worker has left
 * it.  Moved first, the worker would wait to say so behind whatever runs on the CPU it left, which is why
 * it was lent one: another library's spinning thread kept it there for a whole scheduler tick (4 ms),
 * while the calling thread slept and the lent CPU idled
 * (docs/developer/drop-in-internals.md, "tileblas' pool"). */
static inline void
work_begin(Worker *w)
{
#if defined(__linux__)
    pthread_mutex_lock(&w->lend_lock);
    w->working = 1;
    pthread_mutex_unlock(&w->lend_lock);
#else
    (void)w;
#endif
}

/* The work is done: no more lending to it; the CPU it was lent (-1: none), for give_back_cpu once the
 * work is said to be done. */
static inline int
work_end(Worker *w)
{
#if defined(__linux__)
    pthread_mutex_lock(&w->lend_lock);
    int cpu = w->lent_cpu;
    w->working = 0;
    pthread_mutex_unlock(&w->lend_lock);
    return cpu;
#else
    (void)w;
    return -1;
#endif
}

#if defined(__linux__)
/* Whether more threads are runnable on the machine than it has CPUs online: the running count of
 * /proc/loadavg (kept open, read with pread) against sysconf's CPU count; -1 where either cannot be read.
 * The one state of the machine the pool reads (give_back_cpu), and only for where a thread runs. */
static int
machine_crowded(void)
{
    static _Atomic int fd = -2;
    static _Atomic long cpus = 0;
    int f = atomic_load_explicit(&fd, memory_order_acquire);
    if (f == -2) {
        int opened = open("/proc/loadavg", O_RDONLY | O_CLOEXEC), expect = -2;
        if (!atomic_compare_exchange_strong(&fd, &expect, opened) && opened >= 0)
            close(opened); /* another thread opened it first */
        f = atomic_load_explicit(&fd, memory_order_acquire);
    }
    long n = atomic_load_explicit(&cpus, memory_order_relaxed);
    if (n == 0) {
        n = sysconf(_SC_NPROCESSORS_ONLN);
        atomic_store_explicit(&cpus, n, memory_order_relaxed);
    }
    char buf[128];
    ssize_t got = f >= 0 && n > 0 ? pread(f, buf, sizeof buf - 1, 0) : -1;
    if (got <= 0)
        return -1;
    buf[got] = 0; /* "0.52 0.58 0.59 3/412 12345": running/total is the fourth field */
    char *slash = strchr(buf, '/'), *digits = slash;
    if (slash == NULL)
        return -1;
    while (digits > buf && digits[-1] >= '0' && digits[-1] <= '9')
        digits--;
    if (digits == slash)
        return -1;
    return strtol(digits, NULL, 10) > n;
}
#endif

/* After the work is said to be done: a worker lent `cpu` gets its CPU mask back (unless the calling
 * thread, told, took the CPU back first: take_back_cpu) and, where the machine is crowded
 * (machine_crowded: no CPU idles), moves off that CPU, where it still runs (unless its mask put back left
 * it out).  The calling thread, told, was woken while the worker still ran there: with a CPU idle the
 * kernel put it on that one, and a worker that moved off the lent CPU landed on the calling thread's new
 * CPU and shared it with it call after call (a lend, then the worker's part late again); with none idle
 * (another library's spinning thread on the other CPU) it queued behind the worker on the lent CPU, which
 * the worker leaves for it.  The figures: docs/developer/drop-in-internals.md, "tileblas' pool". */
static void
give_back_cpu(Worker *w, int cpu)
{
#if defined(__linux__)
    if (cpu < 0)
        return;
    long long delay = atomic_load_explicit(&give_back_delay_ns, memory_order_relaxed);
    if (delay > 0)
        pause_for(delay);
    pthread_mutex_lock(&w->lend_lock);
    if (w->lent_cpu >= 0) {
        w->lent_cpu = -1;
        sched_setaffinity(0, sizeof w->lend_mask, &w->lend_mask);
    }
    pthread_mutex_unlock(&w->lend_lock);
    if (machine_crowded() != 0)
        step_aside(cpu);
#else
    (void)w;
    (void)cpu;
#endif
}

/* The calling thread, about to sleep until workers finish their work (wait_until): the CPU it leaves idle
 * goes to one of them, w or (w NULL) the first of the slot's workers that is working, which is moved
 * onto it (its mask that CPU alone until its work is said to be done, give_back_cpu).  A worker still
 * working this long after the calling thread's own part is late: woken late, or sharing its CPU with
 * other work (another library's spinning threads, a busy process), where it runs at a fraction of its
 * speed while this CPU idles; the kernel seldom moves it here by itself within a call (a CPU idle as
 * briefly and often as the calling thread's does not look for work to take).  Only where the thread
 * runs: the parts and the bits of the call are the same. */
static Worker *
lend_cpu(Slot *s, Worker *only)
{
#if defined(__linux__)
    int cpu = sched_getcpu();
    if (cpu < 0)
        return NULL;
    int n = only != NULL ? 1 : s->nworkers;
    for (int i = 0; i < n; i++) {
        Worker *w = only != NULL ? only : s->workers[i];
        int tid = atomic_load_explicit(&w->tid, memory_order_acquire), lent = 0;
        if (tid <= 0)
            continue;
        pthread_mutex_lock(&w->lend_lock);
        if (w->working && w->lent_cpu < 0 && sched_getaffinity(tid, sizeof w->lend_mask, &w->lend_mask) == 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            if ((lent = sched_setaffinity(tid, sizeof one, &one) == 0))
                w->lent_cpu = cpu;
        }
        pthread_mutex_unlock(&w->lend_lock);
        if (lent) {
            atomic_fetch_add_explicit(&n_lent, 1, memory_order_relaxed);
            return w;
        }
    }
#else
    (void)s;
    (void)only;
#endif
    return NULL;
}

/* The calling thread, told that the work it waited for is done: a worker it lent its CPU that has not
 * yet given it back (give_back_cpu) gets its CPU mask back now, and is moved off this CPU.  Woken on the
 * lent CPU, the calling thread may have taken it from the worker before the worker gave it back; the
 * worker, its mask that CPU alone, then waited behind the calling thread's next call for a scheduler
 * tick, where it took the next call's part late, was lent the CPU again and so on: ztrsm 512 ran 11.9 ms
 * a call, as on one thread, for seconds.  Told, the calling thread waits for no more work of the worker,
 * and holds the slot: the worker has none. */
static void
take_back_cpu(Worker *w)
{
#if defined(__linux__)
    if (w == NULL)
        return;
    int tid = atomic_load_explicit(&w->tid, memory_order_acquire);
    pthread_mutex_lock(&w->lend_lock);
    int cpu = w->lent_cpu;
    if (cpu >= 0 && tid > 0) {
        w->lent_cpu = -1;
        if (!move_off(tid, &w->lend_mask, cpu))
            sched_setaffinity(tid, sizeof w->lend_mask, &w->lend_mask);
    }
    pthread_mutex_unlock(&w->lend_lock);
#else
    (void)w;
#endif
}

/* ---------------------------------------------------------------------------------- claimed parts */

/* A slot's locks and its waiter's condition as new (at attach, and in a child after fork()). */
static void
slot_sync_init(Slot *s)
{
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->wlock, NULL);
    pthread_cond_init(&s->wcond, NULL);
    atomic_store(&s->waiting, 0);
}

/* After a thread's seq_cst store that may complete what the calling thread waits for: wake it where it
 * sleeps in wait_until. */
static inline void
notify_waiter(Slot *s)
{
    if (atomic_load(&s->waiting)) {
        pthread_mutex_lock(&s->wlock);
        pthread_cond_signal(&s->wcond);
        pthread_mutex_unlock(&s->wlock);
    }
}

/* Claim and run parts of the slot's batch until none is left; the number run.  w: the worker that runs
 * them (NULL: the calling thread). */
static int
claim_parts(Slot *s, Worker *w)
{
    int ran = 0;
    unsigned long long c = atomic_load(&s->claim);
    for (;;) {
        unsigned next = (unsigned)(c & 0xffff), parts = (unsigned)((c >> 16) & 0xffff);
        if (next >= parts)
            return ran;
        pool_job_fn fn = (pool_job_fn)atomic_load_explicit(&s->part_fn, memory_order_relaxed);
        char *data = (char *)atomic_load_explicit(&s->part_data, memory_order_relaxed);
        size_t elsize = atomic_load_explicit(&s->part_elsize, memory_order_relaxed);
        if (!atomic_compare_exchange_weak(&s->claim, &c, c + 1))
            continue; /* c now holds the word as it is */
        if (w != NULL)
            work_begin(w);
        fn((int)next, data + (size_t)next * elsize, 0);
        int lent = w != NULL ? work_end(w) : -1;
        ran++;
        atomic_fetch_add(&s->parts_done, 1); /* seq_cst: before notify_waiter reads waiting */
        notify_waiter(s);
        if (w != NULL)
            give_back_cpu(w, lent);
        c = atomic_load(&s->claim);
    }
}

/* Spin until *flag reaches at least `want`: busy for spin_ns, then asleep until the thread that brings
 * it there says so (notify_waiter), so that this CPU is free: for the thread waited for, where it was
 * queued behind this one, or lent to it (lend_cpu: w, or the slot's first working worker). */
static void
wait_until(Slot *s, _Atomic int *flag, int want, Worker *w)
{
    long long start = 0;
    while (atomic_load_explicit(flag, memory_order_acquire) < want) {
        /* the flag after every pause (a pause is 10-40 ns: 64 of them before a look cost a short split
         * call a microsecond), the clock after 64 */
        for (int k = 0; k < 64 && atomic_load_explicit(flag, memory_order_acquire) < want; k++)
            CPU_RELAX();
        long long t = now_ns();
        if (start == 0)
            start = t;
        else if (t - start > atomic_load_explicit(&spin_ns, memory_order_relaxed)) {
            Worker *lent = lend_cpu(s, w);
            pthread_mutex_lock(&s->wlock);
            atomic_fetch_add_explicit(&n_waits_asleep, 1, memory_order_relaxed);
            atomic_store(&s->waiting, 1); /* seq_cst: before the flag is read again */
            while (atomic_load(flag) < want)
                pthread_cond_wait(&s->wcond, &s->wlock);
            atomic_store(&s->waiting, 0);
            pthread_mutex_unlock(&s->wlock);
            take_back_cpu(lent);
        }
    }
}

/* ---------------------------------------------------------------------------------------- workers */

static inline int
has_work(Worker *w)
{
    return atomic_load_explicit(&w->cmd, memory_order_acquire) != CMD_NONE ||
           atomic_load_explicit(&w->told, memory_order_acquire) != w->seen;
}

/* Spin for work up to spin_ns; 1 when there is some. */
static int
spin_for_work(Worker *w)
{
    long long start = now_ns();
    long long total = atomic_load_explicit(&spin_ns, memory_order_relaxed);
    int got = 0;
    atomic_fetch_add_explicit(&n_spinning, 1, memory_order_relaxed);
    for (;;) {
        for (int k = 0; k < 64; k++) {
            if (has_work(w)) {
                got = 1;
                goto out;
            }
            CPU_RELAX();
        }
        if (now_ns() - start >= total)
            break;
    }
    {
        long long until = start + total + atomic_load_explicit(&yield_ns, memory_order_relaxed);
        while (!(got = has_work(w)) && now_ns() < until)
            sched_yield();
    }
out:
    atomic_fetch_sub_explicit(&n_spinning, 1, memory_order_relaxed);
    return got;
}

/* Sleep until w has work.  On Linux a futex on w->asleep, which the thread that wakes it takes from 1 to
 * 0 (wake): no lock, so a watcher that loses its CPU never holds up the worker or the calling thread. */
static void
worker_sleep(Worker *w)
{
    atomic_fetch_add_explicit(&n_sleeps, 1, memory_order_relaxed);
#if defined(__linux__)
    /* seq_cst: then its work is read; the poster stores work, then reads this.  Only a thread that posted
     * work takes asleep back to 0, so once it is 0 the work is there to see: the futex then returns at
     * once and the loop ends (setting it to 1 again here would lose that wake). */
    atomic_store(&w->asleep, 1);
    while (atomic_load(&w->cmd) == CMD_NONE && atomic_load(&w->told) == w->seen)
        syscall(SYS_futex, (int *)&w->asleep, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
    atomic_store(&w->asleep, 0);
#else
    pthread_mutex_lock(&w->lock);
    atomic_store(&w->asleep, 1); /* seq_cst: pairs with the poster's store, then load of asleep */
    while (atomic_load(&w->cmd) == CMD_NONE && atomic_load(&w->told) == w->seen)
        pthread_cond_wait(&w->wake, &w->lock);
    atomic_store(&w->asleep, 0);
    pthread_mutex_unlock(&w->lock);
#endif
}

static void arm_watcher(Worker *w);
static void watcher_new(Worker *w);

/* A worker that woke from sleep: the time since its slot's work was posted, into the counters (woke,
 * wake_ns, wake_max_ns). */
static void
count_wake(Slot *s)
{
    long long d = now_ns() - atomic_load_explicit(&s->posted, memory_order_relaxed);
    if (d < 0 || d > 1000000000LL)
        return; /* no post to count from (a worker's first wake, or a wake that found no new work) */
    atomic_fetch_add_explicit(&n_woke, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_wake_ns, d, memory_order_relaxed);
    long long m = atomic_load_explicit(&n_wake_max_ns, memory_order_relaxed);
    while (d > m && !atomic_compare_exchange_weak(&n_wake_max_ns, &m, d))
        ;
}

static void *
worker_main(void *arg)
{
    Worker *w = (Worker *)arg;
    int first = 1; /* a new worker sleeps until its first work: there is no call to keep it hot for */
#if defined(__linux__)
    pthread_setname_np(pthread_self(), "tileblas-pool"); /* as top, gdb and py-spy show it */
    atomic_store_explicit(&w->tid, (int)syscall(SYS_gettid), memory_order_release);
#endif
    for (;;) {
        int mask_after = 0; /* woken by its watcher: its mask back after the work (wake_on) */
        if (first || !spin_for_work(w)) {
            if (!first)
                arm_watcher(w);
            first = 0;
            sleep_off(w, atomic_load_explicit(&w->slot->caller_cpu, memory_order_relaxed));
            worker_sleep(w);
            count_wake(w->slot);
            mask_after = atomic_exchange(&w->by_watch, 0);
            if (!mask_after)
                wake_on(w);
        }
        step_aside(atomic_load_explicit(&w->slot->caller_cpu, memory_order_relaxed));
        if (atomic_load_explicit(&w->cmd, memory_order_acquire) == CMD_JOB) {
            atomic_store_explicit(&w->started, 1, memory_order_release);
            work_begin(w);
            w->fn(w->index, w->data, w->arg);
            int lent = work_end(w);
            atomic_store_explicit(&w->cmd, CMD_NONE, memory_order_relaxed);
            atomic_store(&w->done, 1); /* seq_cst: before notify_waiter reads waiting */
            notify_waiter(w->slot);
            give_back_cpu(w, lent);
        }
        unsigned long long told = atomic_load(&w->told);
        if (told != w->seen) {
            w->seen = told;
            long long delay = atomic_load_explicit(&worker_delay_ns, memory_order_relaxed);
            if (delay > 0)
                pause_for(delay);
            claim_parts(w->slot, w);
        }
        if (mask_after)
            wake_on(w); /* before the next sleep_off reads the mask */
    }
    return NULL;
}

/* Start fn(arg) on a detached thread with a stack of `stack` bytes, not the default (RLIMIT_STACK, 8 MiB):
 * address space counts against RLIMIT_AS.  The thread's id in *id.  0, or pthread's error. */
static int
start_detached(void *(*fn)(void *), void *arg, size_t stack, pthread_t *id)
{
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc != 0)
        return rc;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, stack);
    rc = pthread_create(id, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return rc;
}

/* A worker runs OpenBLAS's jobs and one-thread calls (their largest stack use: 2 KiB of STACK_ALLOC; the
 * threaded drivers' job arrays live on the calling thread) and rblas's chunks. */
#define WORKER_STACK ((size_t)1 << 20)

static Worker *
worker_new(Slot *s)
{
    Worker *w = (Worker *)calloc(1, sizeof(Worker));
    if (w == NULL)
        return NULL;
    w->slot = s;
    w->off_cpu = -1;
#if defined(__linux__)
    pthread_mutex_init(&w->lend_lock, NULL);
    w->lent_cpu = -1;
#else
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
#endif
    atomic_store(&w->done, 1);
    if (start_detached(worker_main, w, WORKER_STACK, &w->thread) != 0) {
#if defined(__linux__)
        pthread_mutex_destroy(&w->lend_lock);
#else
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
#endif
        free(w);
        return NULL;
    }
    atomic_fetch_add_explicit(&n_workers, 1, memory_order_relaxed);
    watcher_new(w);
    return w;
}

/* Make sure the slot has n workers (called with the slot's lock held).  0, or -1 where fewer could be
 * made (those made are kept). */
static int
ensure_workers(Slot *s, int n)
{
    while (s->nworkers < n) {
        Worker *w = worker_new(s);
        if (w == NULL)
            return -1;
        s->workers[s->nworkers++] = w;
    }
    return 0;
}

/* Wake w where it sleeps (after the poster's seq_cst store of what it is to see), from a thread on `cpu`
 * (-1: unknown).  0: it did not sleep; 1: woken; 2: woken, and it cannot be put on `cpu` (sleep_off). */
static inline int
wake(Worker *w, int cpu)
{
#if defined(__linux__)
    if (atomic_load(&w->asleep)) {
        int off = cpu >= 0 && w->off_cpu == cpu; /* set before asleep, settled while it sleeps */
        if (!atomic_exchange(&w->asleep, 0))
            return 0; /* woken by another thread meanwhile, or awake */
        syscall(SYS_futex, (int *)&w->asleep, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        atomic_fetch_add_explicit(&n_wakes, 1, memory_order_relaxed);
        return off ? 2 : 1;
    }
#else
    if (atomic_load(&w->asleep)) {
        pthread_mutex_lock(&w->lock);
        int off = cpu >= 0 && atomic_load(&w->asleep) && w->off_cpu == cpu; /* asleep: off_cpu is settled */
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->lock);
        atomic_fetch_add_explicit(&n_wakes, 1, memory_order_relaxed);
        return off ? 2 : 1;
    }
#endif
    return 0;
}

/* Whether w's watcher is looking for its work now (awake, and on a CPU within the last BEAT_NS). */
static inline int
watched(Worker *w)
{
    return atomic_load(&w->watching) &&
           now_ns() - atomic_load_explicit(&w->beat, memory_order_relaxed) < BEAT_NS;
}

/* As wake(), but where w sleeps and its watcher is looking, leave the wake to the watcher: 3. */
static inline int
wake_or_leave(Worker *w, int cpu)
{
    if (atomic_load(&w->asleep) && watched(w)) {
        atomic_fetch_add_explicit(&n_left, 1, memory_order_relaxed);
        return 3;
    }
    return wake(w, cpu);
}

/* A worker's watcher.  Waking a sleeping thread on another CPU costs the thread that wakes it 8-26 us on
 * a virtual machine whose idle CPUs halt (an interrupt the hypervisor delivers), and the woken thread runs
 * 25-90 us after the wake began.  A worker kept awake costs neither, but holds a CPU from the other
 * threads that need it (another library's, the caller's own work).  The watcher keeps it awake in the
 * idle scheduling class (SCHED_IDLE): for watch_ns after the worker fell asleep it spins looking for work
 * posted to the worker, and wakes it, where the worker preempts it at once (the worker's own CPU mask,
 * sleep_off, keeps it off the calling thread's CPU).  A thread of that class runs only where no other
 * thread wants the CPU, and the kernel counts its CPU as idle when it places a woken thread, so other
 * threads do not wait for it.  The watcher keeps the CPU mask it was made with: pinned off the calling
 * thread's CPU, it held the other CPU of two for 100 ms after each call, where another library's
 * spinning OpenBLAS thread then moved to the calling thread's CPU and slept there; that library's next
 * call, a pause later, woke it behind its calling thread and took 7-11 ms instead of 0.15-0.3
 * (docs/developer/drop-in-internals.md, "tileblas' pool": the watcher).  The calling thread then only
 * posts the work (wake_or_leave); where the watcher is not on a CPU (its CPU taken by another thread),
 * the calling thread wakes the worker itself.  Nothing it does changes how a call is divided. */
#if defined(__linux__) && defined(SCHED_IDLE)
#define HAVE_WATCHER 1
/* The watcher wakes w where it sleeps (wake() reads asleep), and counts it. */
static inline void
watcher_wake(Worker *w)
{
    atomic_store(&w->by_watch, 1); /* before the wake the worker reads it after */
    if (wake(w, -1))
        atomic_fetch_add_explicit(&n_watch_wakes, 1, memory_order_relaxed);
    else
        atomic_store(&w->by_watch, 0); /* awake already */
}

static void *
watcher_main(void *arg)
{
    Worker *w = (Worker *)arg;
    /* the idle class, before it first looks (a thread may move itself to it, not back) */
    struct sched_param sp = {0};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0) {
        atomic_store(&w->has_watcher, 0);
        return NULL;
    }
    pthread_setname_np(pthread_self(), "tileblas-watch");
    for (;;) {
        /* asleep until armed (arm_watcher raises watch_seq after it sets watch_until) */
        int seq = atomic_load(&w->watch_seq);
        if (now_ns() >= atomic_load(&w->watch_until)) {
            syscall(SYS_futex, (int *)&w->watch_seq, FUTEX_WAIT_PRIVATE, seq, NULL, NULL, 0);
            continue;
        }
        atomic_store(&w->beat, now_ns());
        atomic_store(&w->watching, 1);
        long long until = atomic_load(&w->watch_until);
        for (;;) {
            int found = 0;
            for (int k = 0; k < 64 && !found; k++) {
                if (has_work(w)) {
                    found = 1;
                    watcher_wake(w);
                }
                CPU_RELAX();
            }
            long long t = now_ns();
            atomic_store_explicit(&w->beat, t, memory_order_relaxed);
            if (!found && t < until) {
                /* The idle class does not keep this thread off a CPU that another thread wants: the
                 * scheduler may still give it a whole time slice there (1-3 ms).  A yield hands it back
                 * at once. */
                sched_yield();
                until = atomic_load(&w->watch_until);
                continue;
            }
            atomic_store(&w->watching, 0); /* seq_cst: then watch_until and the work are read once more */
            if (found) {
                /* the worker is awake: asleep until it arms this again, unless it did meanwhile */
                atomic_compare_exchange_strong(&w->watch_until, &until, 0LL);
                break;
            }
            if (now_ns() < (until = atomic_load(&w->watch_until))) {
                atomic_store(&w->watching, 1); /* armed again meanwhile */
                continue;
            }
            if (has_work(w)) /* posted by a calling thread that saw it watch */
                watcher_wake(w);
            break;
        }
    }
    return NULL;
}
#endif

/* Start w's watcher looking for watch_ns (w is about to sleep). */
static void
arm_watcher(Worker *w)
{
#if HAVE_WATCHER
    long long d = atomic_load_explicit(&watch_ns, memory_order_relaxed);
    if (!atomic_load_explicit(&w->has_watcher, memory_order_relaxed) || d <= 0)
        return;
    atomic_store(&w->watch_until, now_ns() + d); /* seq_cst: then watching is read; the watcher: the reverse */
    if (!atomic_load(&w->watching)) {
        atomic_fetch_add(&w->watch_seq, 1);
        syscall(SYS_futex, (int *)&w->watch_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
#else
    (void)w;
#endif
}

#define WATCHER_STACK ((size_t)64 << 10)

/* Start w's watcher thread in the idle class (it sleeps until arm_watcher); none where that fails. */
static void
watcher_new(Worker *w)
{
    atomic_store(&w->has_watcher, 0);
#if HAVE_WATCHER
    atomic_store(&w->has_watcher, 1); /* the watcher takes it back where it cannot enter the idle class */
    if (start_detached(watcher_main, w, WATCHER_STACK, &w->watcher) != 0)
        atomic_store(&w->has_watcher, 0);
#endif
}

/* -------------------------------------------------------------------------------- calls in flight */

static _Atomic int calls_in_flight = 0;
static _Atomic int gate_closed = 0; /* 1 while fork() or the exit waits for the calls in flight */

static void
calls_enter(void)
{
    for (;;) {
        atomic_fetch_add(&calls_in_flight, 1); /* seq_cst: then the gate is read (closer: the reverse) */
        if (!atomic_load(&gate_closed))
            return;
        atomic_fetch_sub(&calls_in_flight, 1);
        while (atomic_load(&gate_closed)) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
}

static void
calls_leave(void)
{
    atomic_fetch_sub(&calls_in_flight, 1);
}

/* Close the gate and wait up to timeout_ns for the calls in flight; 1 when none is left. */
static int
close_gate(long long timeout_ns)
{
    atomic_store(&gate_closed, 1); /* seq_cst */
    long long end = now_ns() + timeout_ns;
    while (atomic_load(&calls_in_flight) > 0) {
        if (now_ns() > end)
            return 0;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    return 1;
}

/* fork(): the calls in flight finish first (a minute at most); new ones wait until fork() returns. */
static void
before_fork(void)
{
    close_gate(60000000000LL);
}

static void
after_fork_parent(void)
{
    atomic_store(&gate_closed, 0);
}

/* A call that finds a warm-up running ends it and waits until its buffers are given back (the page it is
 * writing, then the frees: microseconds), so that its parts take those buffers, written as far as the
 * warm-up got, and do not share the CPUs with it ("Warming the buffers"). */
static void
stop_warming(void)
{
    if (atomic_load_explicit(&n_warming, memory_order_relaxed) == 0)
        return;
    /* seq_cst, then holding is read; the warm-up: holding raised, then stop read.  So a warm-up not yet
     * holding sees the stop and takes nothing; only one past calls_enter() is waited for, never one that
     * waits for the gate (fork(), the exit) that this call, in flight, holds closed */
    atomic_store(&warm_stop, 1);
    while (atomic_load(&warm_holding) > 0)
        sched_yield();
}

/* --------------------------------------------------------------------- OpenBLAS's parallel calls */

/* Post a job to w from a thread on `cpu`; as wake(). */
static inline int
post_job(Worker *w, dojob_fn fn, int index, void *data, int arg, int cpu)
{
    w->fn = fn;
    w->index = index;
    w->data = data;
    w->arg = arg;
    atomic_store_explicit(&w->done, 0, memory_order_relaxed);
    atomic_store_explicit(&w->started, 0, memory_order_relaxed);
    atomic_store(&w->cmd, CMD_JOB); /* seq_cst */
    return wake_or_leave(w, cpu);
}


static void
run_jobs(Slot *s, dojob_fn dojob, int numjobs, size_t elsize, void *jobdata, int arg)
{
    if (numjobs <= 1) {
        if (numjobs == 1)
            dojob(0, jobdata, arg);
        return;
    }
    stop_warming();
    pthread_mutex_lock(&s->lock);
    if (numjobs > MAX_JOBS || ensure_workers(s, numjobs - 1) != 0) {
        /* The jobs must run at once (Level-3 jobs wait for one another): running them one after the
         * other could hang.  The workers are made when the instance is attached, so this is reached only
         * in a forked child that cannot start threads. */
        fprintf(stderr, "tileblas: cannot start %d threads for an OpenBLAS call; set TILEBLAS_POOL=0 or "
                        "fewer threads\n", numjobs - 1);
        abort();
    }
    atomic_fetch_add_explicit(&n_calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_jobs, numjobs, memory_order_relaxed);
    int cpu = this_cpu();
    atomic_store_explicit(&s->caller_cpu, cpu, memory_order_relaxed);
    atomic_store_explicit(&s->posted, now_ns(), memory_order_relaxed);
    char *base = (char *)jobdata;
    unsigned char woken[MAX_JOBS];
    for (int i = 1; i < numjobs; i++)
        woken[i] = (unsigned char)post_job(s->workers[i - 1], dojob, i, base + (size_t)i * elsize, arg, cpu);
    /* A worker left to its watcher wakes within microseconds; where it has not within WATCH_GRACE_NS (its
     * watcher lost its CPU meanwhile), this thread wakes it: job 0 would wait for it anyway. */
    long long t0 = 0;
    for (int i = 1; i < numjobs; i++) {
        if (woken[i] != 3)
            continue;
        Worker *w = s->workers[i - 1];
        if (t0 == 0)
            t0 = now_ns();
        while (atomic_load(&w->asleep) && now_ns() - t0 < WATCH_GRACE_NS)
            for (int k = 0; k < 16; k++)
                CPU_RELAX();
        woken[i] = (unsigned char)wake(w, cpu);
    }
    /* A worker woken from sleep may have been put on this CPU, behind this thread: job 0 would then wait
     * for it (the jobs wait for one another) until the kernel takes this thread off its CPU, a whole time
     * slice.  The kernel puts a thread woken onto this CPU in its queue before the wake returns, so one
     * yield per woken worker lets such a worker run (and move to another CPU, step_aside); a worker woken
     * on another CPU is not waited for: job 0 starts while it wakes, as in OpenBLAS's own threads. */
    for (int i = 1; i < numjobs; i++)
        if (woken[i] == 1 && !atomic_load_explicit(&s->workers[i - 1]->started, memory_order_acquire))
            sched_yield();
    dojob(0, jobdata, arg);
    long long t_own = now_ns();
    for (int i = 1; i < numjobs; i++)
        wait_until(s, &s->workers[i - 1]->done, 1, s->workers[i - 1]);
    atomic_fetch_add_explicit(&n_tail_ns, now_ns() - t_own, memory_order_relaxed);
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

/* -------------------------------------------------------------------------------- tileblas' parts */

static int
run_inline(pool_job_fn part, int nparts, size_t elsize, void *data)
{
    for (int i = 0; i < nparts; i++)
        part(i, (char *)data + (size_t)i * elsize, 0);
    atomic_fetch_add_explicit(&n_alone, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_parts, nparts, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_caller_parts, nparts, memory_order_relaxed);
    return nparts;
}

static int
pool_run_parts(int slot, pool_job_fn part, int nparts, size_t elsize, void *data, int wake_sleepers)
{
    if (slot < 0 || slot >= atomic_load(&nslots))
        return -1;
    if (nparts <= 0)
        return 0;
    Slot *s = &slots[slot];
    stop_warming();
    atomic_fetch_add_explicit(&n_batches, 1, memory_order_relaxed);
    if (nparts == 1 || nparts > MAX_PARTS || pthread_mutex_trylock(&s->lock) != 0)
        return run_inline(part, nparts, elsize, data);
    int helpers = s->nworkers < nparts - 1 ? s->nworkers : nparts - 1;
    if (helpers == 0) {
        pthread_mutex_unlock(&s->lock);
        return run_inline(part, nparts, elsize, data);
    }
    atomic_store_explicit(&s->part_fn, (uintptr_t)part, memory_order_relaxed);
    atomic_store_explicit(&s->part_data, (uintptr_t)data, memory_order_relaxed);
    atomic_store_explicit(&s->part_elsize, elsize, memory_order_relaxed);
    atomic_store_explicit(&s->parts_done, 0, memory_order_relaxed);
    int cpu = this_cpu();
    atomic_store_explicit(&s->caller_cpu, cpu, memory_order_relaxed);
    atomic_store_explicit(&s->posted, now_ns(), memory_order_relaxed);
    s->generation++;
    atomic_store(&s->claim, (s->generation << 32) | ((unsigned long long)nparts << 16)); /* seq_cst */
    for (int i = 0; i < helpers; i++) {
        Worker *w = s->workers[i];
        atomic_fetch_add(&w->told, 1); /* seq_cst, before wake() reads asleep */
        if (wake_sleepers)
            wake_or_leave(w, cpu);
        else
            atomic_fetch_add_explicit(&n_unwoken, 1, memory_order_relaxed);
    }
    int ran = claim_parts(s, NULL);
    long long t_own = now_ns();
    wait_until(s, &s->parts_done, nparts, NULL);
    atomic_fetch_add_explicit(&n_tail_ns, now_ns() - t_own, memory_order_relaxed);
    pthread_mutex_unlock(&s->lock);
    atomic_fetch_add_explicit(&n_parts, nparts, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_caller_parts, ran, memory_order_relaxed);
    return ran;
}

static int
pool_threads(int slot)
{
    if (slot < 0 || slot >= atomic_load(&nslots))
        return -1;
    return slots[slot].threads;
}

/* In a child after fork() the workers do not exist: forget them (their memory is left), make the
 * locks usable again; the first call that needs workers makes new ones. */
static void
after_fork_child(void)
{
    int n = atomic_load(&nslots);
    for (int k = 0; k < n; k++) {
        slot_sync_init(&slots[k]);
        slots[k].nworkers = 0;
        atomic_store(&slots[k].claim, slots[k].generation << 32);
    }
    pthread_mutex_init(&attach_lock, NULL);
    atomic_store(&n_workers, 0);
    atomic_store(&n_spinning, 0);
    atomic_store(&n_warming, 0);
    atomic_store(&warm_holding, 0);
    atomic_store(&calls_in_flight, 0);
    atomic_store(&gate_closed, 0);
}

/* ------------------------------------------------------------------------ Warming the buffers */

/* The first call of a process on an instance's buffers writes pages the kernel has not yet given it: a
 * page fault each (OpenBLAS maps a buffer per thread that runs a call at once and hands it out again,
 * untouched until a call packs its operands there).  The parts of a split call, one per thread, each take
 * a buffer of the one-thread instance, so the first split call paid those faults on every thread (the
 * figures: docs/developer/drop-in-internals.md, "The first calls of a process").  warm() writes one byte a
 * page of the first `bytes` of `count` buffers, all held at once (so each is another), on a thread of its
 * own: not the caller's time, nor a worker's.  A split call or an OpenBLAS parallel call that comes
 * meanwhile ends it (stop_warming) and takes the buffers as far as they were written.  It counts as a call
 * in flight (fork() and the exit wait for it).  The buffers are OpenBLAS's, taken and given back through
 * its own functions (their addresses from Python); what they hold is scratch, so nothing a call computes
 * changes. */
typedef void *(*buf_alloc_fn)(int);
typedef void (*buf_free_fn)(void *);

typedef struct {
    buf_alloc_fn alloc;
    buf_free_fn release;
    int count;
    size_t bytes;
} WarmJob;

#define WARM_STACK ((size_t)64 << 10)

static void *
warm_main(void *arg)
{
    WarmJob *job = (WarmJob *)arg;
    void *bufs[MAX_JOBS];
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        page = 4096;
#if defined(__linux__)
    pthread_setname_np(pthread_self(), "tileblas-warm");
#endif
    calls_enter();
    atomic_fetch_add(&warm_holding, 1); /* seq_cst, before stop is read (stop_warming) */
    int got = 0, whole = 0;
    while (got < job->count && !atomic_load(&warm_stop) && (bufs[got] = job->alloc(0)) != NULL)
        got++;
    for (int i = 0; i < got; i++) {
        size_t off = 0;
        while (off < job->bytes && !atomic_load_explicit(&warm_stop, memory_order_relaxed)) {
            ((volatile char *)bufs[i])[off] = 0;
            off += (size_t)page;
        }
        if (off < job->bytes)
            break; /* a call wants them: stop_warming() */
        whole++;
    }
    for (int i = got - 1; i >= 0; i--)
        job->release(bufs[i]);
    atomic_fetch_sub(&warm_holding, 1);
    calls_leave();
    atomic_fetch_add(&n_warmed, whole);
    atomic_fetch_sub(&n_warming, 1);
    free(job);
    return NULL;
}

/* Start warming; 1 when its thread started. */
static int
warm_start(buf_alloc_fn alloc, buf_free_fn release, int count, size_t bytes)
{
    WarmJob *job = (WarmJob *)malloc(sizeof(WarmJob));
    if (job == NULL)
        return 0;
    job->alloc = alloc;
    job->release = release;
    job->count = count;
    job->bytes = bytes;
    pthread_t t;
    atomic_store(&warm_stop, 0);
    atomic_fetch_add(&n_warming, 1);
    if (start_detached(warm_main, job, WARM_STACK, &t) != 0) { /* its bufs: 8 KiB of the stack */
        atomic_fetch_sub(&n_warming, 1);
        free(job);
        return 0;
    }
    return 1;
}

static const PoolAPI pool_api = {POOL_API_VERSION, pool_run_parts, pool_threads, calls_enter, calls_leave};

#endif /* POOL_SUPPORTED */

/* ------------------------------------------------------------------------------------------- Python */

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
        slot_sync_init(s);
        s->nworkers = 0;
        s->used = 1;
        atomic_store(&s->caller_cpu, -1);
        s->threads = threads;
        if (ensure_workers(s, threads - 1) != 0)
            failed = 1; /* the slot is not handed out; the workers made wait, asleep, for nothing */
        else {
            ((set_cb_fn)(uintptr_t)setter)(trampolines[k]);
            atomic_store(&nslots, k + 1);
            /* fork()'s handlers again, now that this instance's OpenBLAS has registered its own: the
             * last registered run first before fork(), so the calls in flight are done before OpenBLAS's
             * handler shuts its server down and frees its threads' buffers (see "Calls in flight") */
            pthread_atfork(before_fork, after_fork_parent, after_fork_child);
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

static PyObject *
settings_dict(void)
{
#if POOL_SUPPORTED
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L}", "spin_ns", (long long)atomic_load(&spin_ns), "yield_ns",
                         (long long)atomic_load(&yield_ns), "worker_delay_ns",
                         (long long)atomic_load(&worker_delay_ns), "watch_ns", (long long)atomic_load(&watch_ns),
                         "give_back_delay_ns", (long long)atomic_load(&give_back_delay_ns));
#else
    return PyDict_New();
#endif
}

static PyObject *
pool_configure(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"spin_ns", "yield_ns", "worker_delay_ns", "watch_ns", "give_back_delay_ns", NULL};
    enum { NSET = 5 };
    PyObject *vals[NSET] = {NULL, NULL, NULL, NULL, NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOOO:configure", kwlist, &vals[0], &vals[1], &vals[2],
                                     &vals[3], &vals[4]))
        return NULL;
#if POOL_SUPPORTED
    long long v[NSET];
    /* check all before setting any, so a bad value leaves the settings as they were */
    for (int i = 0; i < NSET; i++) {
        if (vals[i] == NULL || vals[i] == Py_None)
            continue;
        if (!PyLong_Check(vals[i]) || PyBool_Check(vals[i])) {
            PyErr_Format(PyExc_TypeError, "configure: %s must be an int (nanoseconds); got %R", kwlist[i],
                         vals[i]);
            return NULL;
        }
        v[i] = PyLong_AsLongLong(vals[i]);
        if (v[i] == -1 && PyErr_Occurred())
            return NULL;
        if (v[i] < 0) {
            PyErr_Format(PyExc_ValueError, "configure: %s is %lld; it must be >= 0 (nanoseconds)", kwlist[i],
                         v[i]);
            return NULL;
        }
    }
    _Atomic long long *targets[NSET] = {&spin_ns, &yield_ns, &worker_delay_ns, &watch_ns,
                                        &give_back_delay_ns};
    for (int i = 0; i < NSET; i++)
        if (vals[i] != NULL && vals[i] != Py_None)
            atomic_store(targets[i], v[i]);
#endif
    return settings_dict();
}

static PyObject *
pool_stats(PyObject *self, PyObject *unused)
{
#if POOL_SUPPORTED
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:i,s:i,s:L,s:i}", "calls", (long long)atomic_load(&n_calls),
                         "jobs", (long long)atomic_load(&n_jobs), "batches", (long long)atomic_load(&n_batches),
                         "parts", (long long)atomic_load(&n_parts), "caller_parts",
                         (long long)atomic_load(&n_caller_parts), "alone", (long long)atomic_load(&n_alone),
                         "sleeps", (long long)atomic_load(&n_sleeps), "wakes", (long long)atomic_load(&n_wakes),
                         "moved", (long long)atomic_load(&n_moved), "lent", (long long)atomic_load(&n_lent),
                         "unwoken", (long long)atomic_load(&n_unwoken),
                         "waits_asleep", (long long)atomic_load(&n_waits_asleep), "left", (long long)atomic_load(&n_left),
                         "watch_wakes", (long long)atomic_load(&n_watch_wakes), "woke", (long long)atomic_load(&n_woke),
                         "wake_ns", (long long)atomic_load(&n_wake_ns), "wake_max_ns",
                         (long long)atomic_load(&n_wake_max_ns), "tail_ns", (long long)atomic_load(&n_tail_ns),
                         "workers", (long long)atomic_load(&n_workers),
                         "slots", (int)atomic_load(&nslots),
                         "spinning", (int)atomic_load(&n_spinning),
                         "warmed", (long long)atomic_load(&n_warmed), "warming", (int)atomic_load(&n_warming));
#else
    return PyDict_New();
#endif
}

#if POOL_SUPPORTED
static int
slot_arg(PyObject *o, int *slot)
{
    long k = PyLong_AsLong(o);
    if (k == -1 && PyErr_Occurred())
        return 0;
    if (k < 0 || k >= atomic_load(&nslots)) {
        PyErr_Format(PyExc_ValueError, "slot is %ld; there are %d slots", k, (int)atomic_load(&nslots));
        return 0;
    }
    *slot = (int)k;
    return 1;
}
#endif

static PyObject *
pool_hold(PyObject *self, PyObject *args)
{
    PyObject *slot_o;
    int on;
    if (!PyArg_ParseTuple(args, "Op:hold", &slot_o, &on))
        return NULL;
#if POOL_SUPPORTED
    int slot;
    if (!slot_arg(slot_o, &slot))
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = on ? pthread_mutex_lock(&slots[slot].lock) : pthread_mutex_unlock(&slots[slot].lock);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        PyErr_Format(PyExc_RuntimeError, "hold: the slot's lock %s failed (%d)", on ? "lock" : "unlock", rc);
        return NULL;
    }
    Py_RETURN_NONE;
#else
    (void)slot_o;
    (void)on;
    PyErr_SetString(PyExc_RuntimeError, "hold: this build of tileblas has no thread pool");
    return NULL;
#endif
}

#if POOL_SUPPORTED
typedef struct {
    long long spin;
    pthread_t caller;
    int by_worker;
} TestPart;

static void
test_part(int i, void *p, int unused)
{
    TestPart *t = (TestPart *)p;
    (void)i;
    (void)unused;
    if (t->spin > 0)
        pause_for(t->spin);
    t->by_worker = !pthread_equal(pthread_self(), t->caller);
}
#endif

static PyObject *
pool_run_parts_py(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"slot", "nparts", "spin_ns", "wake", NULL};
    PyObject *slot_o;
    int nparts, wake_sleepers = 1;
    long long spin = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Oi|$Lp:run_parts", kwlist, &slot_o, &nparts, &spin,
                                     &wake_sleepers))
        return NULL;
#if POOL_SUPPORTED
    int slot;
    if (!slot_arg(slot_o, &slot))
        return NULL;
    if (nparts < 1 || nparts > MAX_PARTS) {
        PyErr_Format(PyExc_ValueError, "run_parts: nparts is %d, not between 1 and %d", nparts, MAX_PARTS);
        return NULL;
    }
    TestPart *t = (TestPart *)calloc((size_t)nparts, sizeof(TestPart));
    if (t == NULL)
        return PyErr_NoMemory();
    for (int i = 0; i < nparts; i++) {
        t[i].spin = spin;
        t[i].caller = pthread_self();
    }
    Py_BEGIN_ALLOW_THREADS
    pool_run_parts(slot, test_part, nparts, sizeof(TestPart), t, wake_sleepers);
    Py_END_ALLOW_THREADS
    PyObject *out = PyList_New(nparts);
    for (int i = 0; out != NULL && i < nparts; i++)
        PyList_SET_ITEM(out, i, Py_BuildValue("(ii)", i, t[i].by_worker));
    free(t);
    return out;
#else
    (void)slot_o;
    (void)nparts;
    PyErr_SetString(PyExc_RuntimeError, "run_parts: this build of tileblas has no thread pool");
    return NULL;
#endif
}

static PyObject *
pool_warm(PyObject *self, PyObject *args)
{
    unsigned long long alloc, release;
    int count;
    long long bytes;
    if (!PyArg_ParseTuple(args, "KKiL:warm", &alloc, &release, &count, &bytes))
        return NULL;
    if (alloc == 0 || release == 0) {
        PyErr_Format(PyExc_ValueError, "warm: %s is 0, not the address of OpenBLAS's blas_memory_%s",
                     alloc == 0 ? "alloc" : "release", alloc == 0 ? "alloc" : "free");
        return NULL;
    }
    if (count < 1 || count > 1024) { /* MAX_JOBS */
        PyErr_Format(PyExc_ValueError, "warm: count is %d, not between 1 and 1024", count);
        return NULL;
    }
    if (bytes < 0) {
        PyErr_Format(PyExc_ValueError, "warm: bytes is %lld; it must be >= 0", bytes);
        return NULL;
    }
#if POOL_SUPPORTED
    return PyBool_FromLong(warm_start((buf_alloc_fn)(uintptr_t)alloc, (buf_free_fn)(uintptr_t)release, count,
                                      (size_t)bytes));
#else
    Py_RETURN_FALSE;
#endif
}

static PyObject *
pool_quiesce(PyObject *self, PyObject *arg)
{
    double timeout = PyFloat_AsDouble(arg);
    if (timeout == -1.0 && PyErr_Occurred())
        return NULL;
    if (!(timeout >= 0.0)) {
        PyErr_Format(PyExc_ValueError, "quiesce: timeout_s is %R; it must be >= 0 (seconds)", arg);
        return NULL;
    }
#if POOL_SUPPORTED
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = close_gate((long long)(timeout * 1e9));
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(ok);
#else
    Py_RETURN_TRUE;
#endif
}

static PyObject *
pool_in_flight(PyObject *self, PyObject *unused)
{
#if POOL_SUPPORTED
    return PyLong_FromLong(atomic_load(&calls_in_flight));
#else
    return PyLong_FromLong(0);
#endif
}

static PyObject *
pool_machine_crowded(PyObject *self, PyObject *unused)
{
#if POOL_SUPPORTED && defined(__linux__)
    return PyLong_FromLong(machine_crowded());
#else
    return PyLong_FromLong(-1);
#endif
}

static PyMethodDef methods[] = {
    {"quiesce", pool_quiesce, METH_O,
     "quiesce(timeout_s) -> bool: wait until no BLAS call is in flight and let none start again (the "
     "interpreter's exit)"},
    {"in_flight", pool_in_flight, METH_NOARGS, "in_flight() -> int: BLAS calls without the GIL in flight now"},
    {"attach", pool_attach, METH_VARARGS,
     "attach(setter, threads) -> slot: run the parallel jobs of the OpenBLAS whose "
     "openblas_set_threads_callback_function is at address setter on this pool"},
    {"configure", (PyCFunction)(void (*)(void))pool_configure, METH_VARARGS | METH_KEYWORDS,
     "configure(*, spin_ns=None, yield_ns=None, worker_delay_ns=None, watch_ns=None, give_back_delay_ns=None)"
     " -> settings"},
    {"stats", pool_stats, METH_NOARGS, "stats() -> counters of the pool"},
    {"machine_crowded", pool_machine_crowded, METH_NOARGS,
     "machine_crowded() -> int: 1 where more threads are runnable than the machine has CPUs online, 0 where "
     "not, -1 where that cannot be read (what a lent worker reads before it leaves the CPU it was lent)"},
    {"warm", pool_warm, METH_VARARGS,
     "warm(alloc, release, count, bytes) -> bool: on a thread of its own, take count buffers through the "
     "OpenBLAS function at address alloc, write a byte on each page of their first bytes, give them back "
     "through release; whether the thread started"},
    {"hold", pool_hold, METH_VARARGS,
     "hold(slot, on): take (True) or give back (False) the slot's lock from this thread; meanwhile other "
     "threads' parts on it run on their calling thread alone"},
    {"run_parts", (PyCFunction)(void (*)(void))pool_run_parts_py, METH_VARARGS | METH_KEYWORDS,
     "run_parts(slot, nparts, *, spin_ns=0) -> [(index, by_worker)]: run test parts that each spin spin_ns"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pool", "The threads that run the parallel work of tileblas' OpenBLAS instances.",
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
        pthread_atfork(before_fork, after_fork_parent, after_fork_child);
        registered = 1;
    }
#endif
    if (PyModule_AddIntConstant(m, "supported", POOL_SUPPORTED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
#if POOL_SUPPORTED
    PyObject *cap = PyCapsule_New((void *)&pool_api, POOL_CAPSULE, NULL);
    if (cap == NULL || PyModule_AddObject(m, "_api", cap) < 0) {
        Py_XDECREF(cap);
        Py_DECREF(m);
        return NULL;
    }
#endif
    return m;
}
