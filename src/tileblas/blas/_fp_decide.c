/*
 * The small-call path's configuration and decide() (tileblas.blas._fastpath; _fp.h has the plan of the files).
 *
 * decide(call, config) -> path is the one place the path of a Level-3 call is chosen: a function of the
 * call (routine, precision, shapes, flags, operand layouts) and of the configuration (limits, entry points,
 * the pool slot, the thread setting in force), never of the moment
 * (docs/developer/drop-in-internals.md, "Same call, same bits: how").  In order:
 *
 *   PATH_PYTHON      flops at or above the tile crossover, or a trmm/trsm shape the recursion may take
 *   PATH_RANK_GEMM   real syrk/syr2k into a new c with op(a) = a in Fortran order, below the route's
 *                    limits: gemm over all of C, in parts on the pool or as one call
 *   PATH_SPLIT       flops in the routine's split range, not below its one-thread limit, on several
 *                    threads, at least two parts of the least part: parts on the one-thread instance,
 *                    at once on the pool (gemm, symm/hemm, trmm/trsm: not with an operand copied first)
 *   PATH_ONE_THREAD  below the family's one-thread limit: one call on the one-thread instance
 *   PATH_INSTANCE    one call on the instance of the thread setting
 *
 * A call it would run that has at least gpu_ask flops (GPUs may take calls: the GPU floor) is then put to
 * gpu_hook, the drop-in's GPU policy (tileblas.blas._dispatch): where the GPUs take it, PATH_PYTHON (whose
 * GPU target gives the same answer); else the path above, so that a call kept on the CPU runs as it runs
 * where no GPU may be used, with the same bits.
 *
 * The layout stage asks one rule of it too (fp_copy_beats_conjugate: herk/her2k on C-ordered operands).
 * The part count of a split is one small function (part_count).  The limits are fields of the
 * configuration; what each is: tileblas.policy._dropin.DropInConfig; why each has its value:
 * docs/measurements/drop-in.md, "Why each limit: the figures behind the small-call path's defaults".
 *
 * Python API (methods of the module)
 *   configure(config)   set everything the path reads, from a dict with exactly the keys of config();
 *                       checked completely before anything changes (a refused configuration changes
 *                       nothing).  Keys:
 *       enabled             the default runtime takes the native path for small Level-3 calls
 *       contextvar          the current-runtime ContextVar (a value in it: Python path), or None
 *       limits              {family or 'dtrmm/L': flops}: calls with at least this many take the Python
 *                           path (a family's trmm/trsm key sets every precision and side, a 'dtrmm/L' key
 *                           one of them); families not named: 0 (never the C path)
 *       windows             {'dtrmm/L': (min_order, rhs_lo, rhs_hi) or None}: the recursion's shapes
 *       entries             {'dgemm': address}: the Fortran entry points of the thread setting's instance
 *       one_thread_entries  {'dgemm': address}: those of the one-thread instance
 *       one_thread          {'dgemm': flops}: below, one call on the one-thread instance
 *       split               {'dgemm': (lo, hi)}: flops run split on the pool (not named: never)
 *       rank_gemm           {'dsyrk': (one_call, split)}: the syrk/syr2k gemm route's limits
 *       pool_slot           the pool slot of the instance (-1: none: no split)
 *       get_num_threads     the address of the instance's openblas_get_num_threads (0: none)
 *       gil_flops, gil_elements, convert_max, part_fraction, part_min, max_parts, herk_copy_k
 *       gpu_ask             flops from which a call the path would run is put to gpu_hook
 *       gpu_hook            gpu_hook(family, prefix, m, n, k) -> bool (the GPUs take the call), or None
 *   config() -> dict    the configuration in force, as configure takes it (configure(config()) changes
 *                       nothing; ranges never taken are left out)
 *   stats() -> dict     split_calls, rank_gemm_calls: calls run split, and by the gemm route, so far
 */
#include "_fp.h"

Config fp_cfg = {.pool_slot = -1}; /* off until configure (tileblas.blas._dispatch, at its import) */

/* ------------------------------------------------------------------------------------- decide() */

/* Whether a trmm/trsm call has a shape the recursion may take (only the Python path runs it). */
static inline int
recursion_shape(const Call *c, const Limits *r)
{
    const double *w = r->window[c->side];
    double rhs = c->side ? c->m : c->n;
    return w[0] > 0 && c->k >= w[0] && rhs >= w[1] && rhs <= w[2];
}

/* The entry point of one call of these flops: the one-thread instance's below the family's one-thread
 * limit, else the instance of the thread setting. */
static inline void *
one_call(const Limits *r, double flops)
{
    return r->entry1 != NULL && flops < r->one_thread ? r->entry1 : r->entry;
}

/* The least part of a split along an order: order / part_fraction, part_min at least (every part packs
 * all of the other operand: thinner parts spend more on that than they gain). */
static inline int
least_part(const Config *cfg, int order)
{
    int q = order / cfg->part_fraction;
    return q > cfg->part_min ? q : cfg->part_min;
}

/* The part count of a split: one part per thread of the instance's setting in force (threadpoolctl's),
 * at most max_parts and at most `most`; 0 where that is fewer than two. */
static int
part_count(const Config *cfg, int most)
{
    int parts = cfg->get_num_threads();
    if (parts > cfg->max_parts) parts = cfg->max_parts;
    if (parts > most) parts = most;
    return parts < 2 ? 0 : parts;
}

/* The parts a call of routine r (precision prec) runs in, along `len` rows or columns, each at least the
 * least part of `order` (`order` 0: part_min): where its flops lie in the routine's split range and not
 * below its one-thread limit, with the one-thread entries (its own and gemm's) and a pool slot; 0: not
 * split. */
static inline int
split_parts(const Config *cfg, const Limits *r, int prec, double flops, int len, int order)
{
    if (!(flops >= r->split[0] && flops < r->split[1]) || cfg->pool_slot < 0 || pool_api == NULL
        || cfg->get_num_threads == NULL || flops < r->one_thread || r->entry1 == NULL
        || cfg->r[GEMM][prec].entry1 == NULL)
        return 0;
    return part_count(cfg, len / (order > 0 ? least_part(cfg, order) : cfg->part_min));
}

/* The path on the CPU (decide() without the GPU question). */
static Path
decide_cpu(const Call *c, const Config *cfg)
{
    const Limits *r = &cfg->r[c->fam][c->prec];
    int parts = 0;
    Path p = {PATH_PYTHON, 0, NULL, NULL, NULL, 0, NULL};
    if (!(c->flops < r->tile[c->side])) {
        p.why = "tiles";
        return p;
    }
    switch (c->fam) {
    case GEMM: /* columns of C (and of op(b)), each at least the least part of m */
        if (!c->a.copy && !c->b.copy) parts = split_parts(cfg, r, c->prec, c->flops, c->n, c->m);
        break;
    case TRMM:
    case TRSM:
        if (recursion_shape(c, r)) {
            p.why = "recursion";
            return p;
        }
        /* fall through */
    case SYMM:
    case HEMM: /* columns of C or b for side L, rows for side R, each at least the least part of a's order */
        if (!c->a.copy) parts = split_parts(cfg, r, c->prec, c->flops, c->side ? c->m : c->n, c->k);
        break;
    default: /* the syrk family: the gemm route, else strips of the triangle of at least part_min rows */
        if (c->fresh && c->f_trans == 'N' && !c->cplx && c->flops < r->rank_gemm[1]
            && cfg->r[GEMM][c->prec].entry != NULL) {
            const Limits *g = &cfg->r[GEMM][c->prec];
            double gflops = 2.0 * c->n * c->n * c->k; /* of one gemm: the split and the instance go by gemm's */
            int rparts = split_parts(cfg, g, c->prec, gflops, c->n, c->n);
            if (rparts > 0 || c->flops < r->rank_gemm[0]) {
                p.kind = PATH_RANK_GEMM;
                p.parts = rparts;
                p.part_fn = g->entry1;
                p.fn = one_call(g, gflops);
                p.nogil = gflops > cfg->gil_flops;
                return p;
            }
        }
        if (c->k > 0) parts = split_parts(cfg, r, c->prec, c->flops, c->n, 0);
        break;
    }
    p.fn = one_call(r, c->flops);
    p.nogil = c->flops > cfg->gil_flops;
    if (parts > 0) {
        p.kind = PATH_SPLIT;
        p.parts = parts;
        p.part_fn = r->entry1;
        p.part_gemm = cfg->r[GEMM][c->prec].entry1;
        return p;
    }
    p.kind = p.fn == r->entry ? PATH_INSTANCE : PATH_ONE_THREAD;
    return p;
}

/* Whether the GPUs take a call (gpu_hook's answer; the hook failing: no, the exception reported as
 * unraisable, the call kept on the CPU).  The hook is held for the call: it may configure the path again
 * (the GPUs found or not), which lets go of the configuration's reference. */
static int
gpu_takes(const Call *c, const Config *cfg)
{
    int m = c->fam >= SYRK && c->fam <= HER2K ? c->n : c->m, took;
    PyObject *hook = Py_NewRef(cfg->gpu_hook);
    PyObject *r = PyObject_CallFunction(hook, "sCiii", FAMILY[c->fam], PREFIXES[c->prec], m, c->n, c->k);
    took = r == NULL ? -1 : PyObject_IsTrue(r);
    Py_XDECREF(r);
    if (took < 0) {
        PyErr_WriteUnraisable(hook);
        took = 0;
    }
    Py_DECREF(hook);
    return took;
}

Path
fp_decide(const Call *c, const Config *cfg)
{
    Path p = decide_cpu(c, cfg);
    if (p.kind != PATH_PYTHON && cfg->gpu_hook != NULL && c->flops >= cfg->gpu_ask && !is_zero(&c->alpha, c->prec)
        && c->m > 0 && c->n > 0 && c->k > 0 && gpu_takes(c, cfg)) {
        Path py = {PATH_PYTHON, 0, NULL, NULL, NULL, 0, "gpu"};
        return py;
    }
    return p;
}

/* herk/her2k on C-ordered operands: whether copies of the n x k operands to Fortran order cost less than
 * solving the conjugate problem (c's triangle conjugated after the call, and before where c is read):
 * from n >= herk_copy_k x k (single, double precision), twice that where c is read. */
int
fp_copy_beats_conjugate(const Call *c, const Config *cfg)
{
    return cfg->herk_copy_k[c->prec == 2 ? 0 : 1] * c->k <= (double)c->n * (c->cbeta ? 2 : 1);
}

static const char *const PATH_NAME[] = {"python", "one_thread", "instance", "split", "rank_gemm"};

/* decide()'s answer as Python sees it (tileblas.blas._fastpath.decide): a new dict, or NULL with an
 * exception.  c may be NULL (no descriptor: the call was not bound). */
PyObject *
fp_path_dict(const Path *p, const Call *c)
{
    const char *entry = NULL;
    if (p->kind == PATH_SPLIT || (p->kind == PATH_RANK_GEMM && p->parts > 0)) entry = "one_thread";
    else if (p->kind != PATH_PYTHON && c != NULL) {
        int f = p->kind == PATH_RANK_GEMM ? GEMM : c->fam;
        entry = p->fn != NULL && p->fn == fp_cfg.r[f][c->prec].entry1 ? "one_thread" : "instance";
    }
    PyObject *flops, *copied, *r;
    if (c == NULL) {
        flops = Py_NewRef(Py_None);
        copied = PyTuple_New(0);
    }
    else {
        flops = PyFloat_FromDouble(c->flops);
        copied = c->a.copy && c->b.copy ? Py_BuildValue("(ss)", "a", "b")
                 : c->a.copy          ? Py_BuildValue("(s)", "a")
                 : c->b.copy          ? Py_BuildValue("(s)", "b")
                                      : PyTuple_New(0);
    }
    if (flops == NULL || copied == NULL) {
        Py_XDECREF(flops);
        Py_XDECREF(copied);
        return NULL;
    }
    r = Py_BuildValue("{s:s,s:i,s:z,s:N,s:z,s:O,s:N}", "path", PATH_NAME[p->kind], "parts", p->parts, "entry",
                      entry, "flops", flops, "why", p->why, "conjugate", c != NULL && c->conj ? Py_True : Py_False,
                      "copied", copied);
    return r;
}

/* ---------------------------------------------------------------------------------- configure() */

static const char *const KEYS[] = {"enabled", "contextvar", "limits", "windows", "entries", "one_thread_entries",
                                   "one_thread", "split", "rank_gemm", "pool_slot", "get_num_threads",
                                   "gil_flops", "gil_elements", "convert_max", "part_fraction", "part_min",
                                   "max_parts", "herk_copy_k", "gpu_ask", "gpu_hook", NULL};

/* "dgemm" -> its family, *prec its precision; -1 when the name is not a Level-3 routine (no exception). */
static int
routine_key(PyObject *key, int *prec)
{
    const char *s = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
    if (s == NULL || (*prec = prefix_index(s[0])) < 0) {
        PyErr_Clear();
        return -1;
    }
    for (int i = 0; i < NFAM; i++)
        if (strcmp(s + 1, FAMILY[i]) == 0) return (*prec < 2 && (i == HEMM || i == HERK || i == HER2K)) ? -1 : i;
    return -1;
}

/* "gemm" -> its family; -1 (no exception) when not one. */
static int
family_key(PyObject *key)
{
    const char *s = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
    if (s == NULL) {
        PyErr_Clear();
        return -1;
    }
    for (int i = 0; i < NFAM; i++)
        if (strcmp(s, FAMILY[i]) == 0) return i;
    return -1;
}

/* "dtrmm/L" -> TRMM or TRSM, *prec, *side (0 L, 1 R); -1 (no exception) when the key is not of that form. */
static int
tri_key(PyObject *key, int *prec, int *side)
{
    const char *s = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
    if (s == NULL) {
        PyErr_Clear();
        return -1;
    }
    if (strlen(s) != 7 || s[5] != '/' || (s[6] != 'L' && s[6] != 'R') || (*prec = prefix_index(s[0])) < 0) return -1;
    *side = s[6] == 'R';
    if (strncmp(s + 1, "trmm", 4) == 0) return TRMM;
    if (strncmp(s + 1, "trsm", 4) == 0) return TRSM;
    return -1;
}

/* A number of flops (or a count): finite or infinite, not NaN, >= 0.  -1 with an exception naming it. */
static int
get_flops(PyObject *v, const char *field, PyObject *key, double *out)
{
    double d;
    if (PyBool_Check(v) || !(PyFloat_Check(v) || PyLong_Check(v) || PyArray_IsScalar(v, Floating)
                             || PyArray_IsScalar(v, Integer))) {
        if (key == NULL) PyErr_Format(PyExc_TypeError, "configure: %s must be a number, got %R", field, v);
        else PyErr_Format(PyExc_TypeError, "configure: %s[%R] must be a number of flops, got %R", field, key, v);
        return -1;
    }
    d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) return -1;
    if (!(d >= 0)) {
        if (key == NULL) PyErr_Format(PyExc_ValueError, "configure: %s must be >= 0, got %R", field, v);
        else PyErr_Format(PyExc_ValueError, "configure: %s[%R] must be >= 0, got %R", field, key, v);
        return -1;
    }
    *out = d;
    return 0;
}

/* A pair (lo, hi) of flops. */
static int
get_pair(PyObject *v, const char *field, PyObject *key, const char *what, double out[2])
{
    if (!PyTuple_Check(v) || PyTuple_GET_SIZE(v) != 2) {
        if (key == NULL) PyErr_Format(PyExc_TypeError, "configure: %s must be a tuple %s, got %R", field, what, v);
        else PyErr_Format(PyExc_TypeError, "configure: %s[%R] must be a tuple %s of flops, got %R", field, key, what,
                          v);
        return -1;
    }
    for (int i = 0; i < 2; i++)
        if (get_flops(PyTuple_GET_ITEM(v, i), field, key, &out[i]) < 0) return -1;
    return 0;
}

/* An address (an int, 0 for none). */
static int
get_address(PyObject *v, const char *field, PyObject *key, void **out)
{
    if (!PyLong_Check(v) || PyBool_Check(v)) {
        if (key == NULL) PyErr_Format(PyExc_TypeError, "configure: %s must be an address (int), got %R", field, v);
        else PyErr_Format(PyExc_TypeError, "configure: %s[%R] must be an address (int), got %R", field, key, v);
        return -1;
    }
    *out = PyLong_AsVoidPtr(v);
    return (*out == NULL && PyErr_Occurred()) ? -1 : 0;
}

/* An integer in [lo, hi]. */
static int
get_int(PyObject *v, const char *field, long lo, long hi, long *out)
{
    int overflow;
    if (!PyLong_Check(v) || PyBool_Check(v)) {
        PyErr_Format(PyExc_TypeError, "configure: %s must be an int, got %R", field, v);
        return -1;
    }
    *out = PyLong_AsLongAndOverflow(v, &overflow);
    if (*out == -1 && PyErr_Occurred()) return -1;
    if (overflow || *out < lo || *out > hi) {
        PyErr_Format(PyExc_ValueError, "configure: %s must be in [%ld, %ld], got %R", field, lo, hi, v);
        return -1;
    }
    return 0;
}

/* The value of a dict field (borrowed), checked to be a dict. */
static PyObject *
dict_field(PyObject *cfg, const char *field)
{
    PyObject *d = PyDict_GetItemString(cfg, field);
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "configure: %s must be a dict, got %R", field, d);
        return NULL;
    }
    return d;
}

static int
parse_limits(PyObject *cfg, Config *n)
{
    PyObject *d = dict_field(cfg, "limits"), *key, *value;
    Py_ssize_t pos = 0;
    if (d == NULL) return -1;
    /* families first, then the per-precision trmm/trsm keys over them, whatever the dict's order */
    for (int pass = 0; pass < 2; pass++) {
        pos = 0;
        while (PyDict_Next(d, &pos, &key, &value)) {
            int f = family_key(key), p, sd;
            double v;
            if (f < 0 && tri_key(key, &p, &sd) < 0) {
                PyErr_Format(PyExc_ValueError, "configure: limits: unknown Level-3 family %R (a family, or e.g. "
                             "'dtrmm/L')", key);
                return -1;
            }
            if ((pass == 0) != (f >= 0)) continue;
            if (get_flops(value, "limits", key, &v) < 0) return -1;
            if (f >= 0) { /* a family's limit: every precision and side */
                n->limits[f] = v;
                for (p = 0; p < 4; p++) n->r[f][p].tile[0] = n->r[f][p].tile[1] = v;
            }
            else
                n->r[tri_key(key, &p, &sd)][p].tile[sd] = v;
        }
    }
    return 0;
}

static int
parse_windows(PyObject *cfg, Config *n)
{
    PyObject *d = dict_field(cfg, "windows"), *key, *value;
    Py_ssize_t pos = 0;
    if (d == NULL) return -1;
    while (PyDict_Next(d, &pos, &key, &value)) {
        int p, sd, f = tri_key(key, &p, &sd);
        double *w;
        if (f < 0) {
            PyErr_Format(PyExc_ValueError, "configure: windows: unknown key %R (expected e.g. 'dtrmm/L')", key);
            return -1;
        }
        w = n->r[f][p].window[sd];
        if (value == Py_None) continue;
        if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 3) {
            PyErr_Format(PyExc_ValueError, "configure: windows[%R] must be (min_order, rhs_lo, rhs_hi) or None, "
                         "got %R", key, value);
            return -1;
        }
        for (int i = 0; i < 3; i++) {
            w[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(value, i));
            if (w[i] == -1.0 && PyErr_Occurred()) return -1;
        }
        if (!(w[0] >= 1)) {
            PyErr_Format(PyExc_ValueError, "configure: windows[%R]: min_order must be >= 1, got %R", key, value);
            return -1;
        }
    }
    return 0;
}

static int
parse_entries(PyObject *cfg, const char *field, Config *n, int one)
{
    PyObject *d = dict_field(cfg, field), *key, *value;
    Py_ssize_t pos = 0;
    if (d == NULL) return -1;
    while (PyDict_Next(d, &pos, &key, &value)) {
        int p, f = routine_key(key, &p);
        if (f < 0) {
            PyErr_Format(PyExc_ValueError, "configure: %s: unknown Level-3 routine %R", field, key);
            return -1;
        }
        if (get_address(value, field, key, one ? &n->r[f][p].entry1 : &n->r[f][p].entry) < 0) return -1;
    }
    return 0;
}

static int
parse_one_thread(PyObject *cfg, Config *n)
{
    PyObject *d = dict_field(cfg, "one_thread"), *key, *value;
    Py_ssize_t pos = 0;
    if (d == NULL) return -1;
    while (PyDict_Next(d, &pos, &key, &value)) {
        int p, f = routine_key(key, &p);
        if (f < 0) {
            PyErr_Format(PyExc_ValueError, "configure: one_thread: unknown Level-3 routine %R", key);
            return -1;
        }
        if (get_flops(value, "one_thread", key, &n->r[f][p].one_thread) < 0) return -1;
    }
    return 0;
}

static int
parse_split(PyObject *cfg, Config *n)
{
    PyObject *d = dict_field(cfg, "split"), *key, *value;
    Py_ssize_t pos = 0;
    if (d == NULL) return -1;
    while (PyDict_Next(d, &pos, &key, &value)) {
        int p, f = routine_key(key, &p);
        if (f < 0) {
            PyErr_Format(PyExc_ValueError, "configure: split: %R is not a Level-3 routine", key);
            return -1;
        }
        if (get_pair(value, "split", key, "(lo, hi)", n->r[f][p].split) < 0) return -1;
    }
    return 0;
}

static int
parse_rank_gemm(PyObject *cfg, Config *n)
{
    PyObject *d = dict_field(cfg, "rank_gemm"), *key, *value;
    Py_ssize_t pos = 0;
    if (d == NULL) return -1;
    while (PyDict_Next(d, &pos, &key, &value)) {
        int p, f = routine_key(key, &p);
        if ((f != SYRK && f != SYR2K) || p >= 2) {
            PyErr_Format(PyExc_ValueError, "configure: rank_gemm: %R is not a real syrk or syr2k routine", key);
            return -1;
        }
        if (get_pair(value, "rank_gemm", key, "(one_call, split)", n->r[f][p].rank_gemm) < 0) return -1;
    }
    return 0;
}

static int
parse_pool(PyObject *cfg, Config *n)
{
    long slot;
    void *get = NULL;
    if (get_address(PyDict_GetItemString(cfg, "get_num_threads"), "get_num_threads", NULL, &get) < 0
        || get_int(PyDict_GetItemString(cfg, "pool_slot"), "pool_slot", -1, INT_MAX, &slot) < 0) return -1;
    if (slot >= 0) {
        if (get == NULL) {
            PyErr_SetString(PyExc_ValueError, "configure: a pool_slot needs the instance's get_num_threads address");
            return -1;
        }
        if (pool_api == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "configure: pool_slot given, but this build has no thread pool");
            return -1;
        }
        if (pool_api->threads((int)slot) < 2) {
            PyErr_Format(PyExc_ValueError, "configure: pool_slot %ld is not a slot of a multi-threaded instance", slot);
            return -1;
        }
    }
    n->pool_slot = (int)slot;
    n->get_num_threads = (int (*)(void))get;
    return 0;
}

static int
parse_scalars(PyObject *cfg, Config *n)
{
    PyObject *on = PyDict_GetItemString(cfg, "enabled"), *var = PyDict_GetItemString(cfg, "contextvar"), *hook;
    long v;
    if (!PyBool_Check(on)) {
        PyErr_Format(PyExc_TypeError, "configure: enabled must be a bool, got %R", on);
        return -1;
    }
    n->enabled = on == Py_True;
    if (var != Py_None && !PyContextVar_CheckExact(var)) {
        PyErr_Format(PyExc_TypeError, "configure: contextvar must be a contextvars.ContextVar or None, got %R", var);
        return -1;
    }
    n->contextvar = var == Py_None ? NULL : var;
    if (get_flops(PyDict_GetItemString(cfg, "gil_flops"), "gil_flops", NULL, &n->gil_flops) < 0) return -1;
    if (get_int(PyDict_GetItemString(cfg, "gil_elements"), "gil_elements", 0, LONG_MAX, &n->gil_elements) < 0)
        return -1;
    if (get_int(PyDict_GetItemString(cfg, "convert_max"), "convert_max", 0, LONG_MAX, &n->convert_max) < 0) return -1;
    if (get_int(PyDict_GetItemString(cfg, "part_fraction"), "part_fraction", 1, INT_MAX, &v) < 0) return -1;
    n->part_fraction = (int)v;
    if (get_int(PyDict_GetItemString(cfg, "part_min"), "part_min", 1, INT_MAX, &v) < 0) return -1;
    n->part_min = (int)v;
    if (get_int(PyDict_GetItemString(cfg, "max_parts"), "max_parts", 2, MAX_PARTS, &v) < 0) return -1;
    n->max_parts = (int)v;
    if (get_flops(PyDict_GetItemString(cfg, "gpu_ask"), "gpu_ask", NULL, &n->gpu_ask) < 0) return -1;
    hook = PyDict_GetItemString(cfg, "gpu_hook");
    if (hook != Py_None && !PyCallable_Check(hook)) {
        PyErr_Format(PyExc_TypeError, "configure: gpu_hook must be callable or None, got %R", hook);
        return -1;
    }
    n->gpu_hook = hook == Py_None ? NULL : hook;
    return get_pair(PyDict_GetItemString(cfg, "herk_copy_k"), "herk_copy_k", NULL, "(single, double)",
                    n->herk_copy_k);
}

PyObject *
fp_configure(PyObject *mod, PyObject *cfg)
{
    Config n;
    PyObject *old, *old_hook;
    Py_ssize_t nkeys = 0;
    (void)mod;
    if (!PyDict_Check(cfg)) {
        PyErr_Format(PyExc_TypeError, "configure takes a dict of the C path's configuration (config() gives one), "
                     "got %R", cfg);
        return NULL;
    }
    for (const char *const *k = KEYS; *k != NULL; k++, nkeys++)
        if (PyDict_GetItemString(cfg, *k) == NULL) {
            PyErr_Format(PyExc_ValueError, "configure: the configuration has no '%s' (config() gives every key)", *k);
            return NULL;
        }
    if (PyDict_GET_SIZE(cfg) != nkeys) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(cfg, &pos, &key, &value)) {
            const char *s = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
            const char *const *k = KEYS;
            if (s != NULL)
                while (*k != NULL && strcmp(*k, s) != 0) k++;
            if (s == NULL || *k == NULL) {
                PyErr_Clear();
                PyErr_Format(PyExc_ValueError, "configure: unknown key %R", key);
                return NULL;
            }
        }
    }
    memset(&n, 0, sizeof n);
    if (parse_scalars(cfg, &n) < 0 || parse_limits(cfg, &n) < 0 || parse_windows(cfg, &n) < 0
        || parse_entries(cfg, "entries", &n, 0) < 0 || parse_entries(cfg, "one_thread_entries", &n, 1) < 0
        || parse_one_thread(cfg, &n) < 0 || parse_split(cfg, &n) < 0 || parse_rank_gemm(cfg, &n) < 0
        || parse_pool(cfg, &n) < 0)
        return NULL;
    /* all of it checked: now in force, at once */
    Py_XINCREF(n.contextvar);
    Py_XINCREF(n.gpu_hook);
    old = fp_cfg.contextvar;
    old_hook = fp_cfg.gpu_hook;
    fp_cfg = n;
    Py_XDECREF(old);
    Py_XDECREF(old_hook);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------- config() */

/* d[name] = v, v's reference taken over: 0, or -1 (v NULL: its exception stands). */
static int
put(PyObject *d, const char *name, PyObject *v)
{
    int rc = v == NULL ? -1 : PyDict_SetItemString(d, name, v);
    Py_XDECREF(v);
    return rc;
}

static PyObject *
routine_name(int f, int p)
{
    return PyUnicode_FromFormat("%c%s", PREFIXES[p], FAMILY[f]);
}

static PyObject *
tri_name(int f, int p, int sd)
{
    return PyUnicode_FromFormat("%c%s/%c", PREFIXES[p], FAMILY[TRMM + f], "LR"[sd]);
}

/* {routine: address} of the entries set (one: the one-thread instance's). */
static PyObject *
entries_dict(const Config *c, int one)
{
    PyObject *d = PyDict_New();
    for (int f = 0; d != NULL && f < NFAM; f++)
        for (int p = 0; p < 4; p++) {
            void *e = one ? c->r[f][p].entry1 : c->r[f][p].entry;
            PyObject *k, *v;
            int rc;
            if (e == NULL) continue;
            if ((k = routine_name(f, p)) == NULL || (v = PyLong_FromVoidPtr(e)) == NULL) {
                Py_XDECREF(k);
                Py_CLEAR(d);
                break;
            }
            rc = PyDict_SetItem(d, k, v);
            Py_DECREF(k);
            Py_DECREF(v);
            if (rc < 0) {
                Py_CLEAR(d);
                break;
            }
        }
    return d;
}

/* d[key] = v, both references taken over; -1 on failure (either NULL: its exception stands). */
static int
set_item(PyObject *d, PyObject *key, PyObject *v)
{
    int rc = (key == NULL || v == NULL) ? -1 : PyDict_SetItem(d, key, v);
    Py_XDECREF(key);
    Py_XDECREF(v);
    return rc;
}

static PyObject *
limits_dict(const Config *c)
{
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    for (int f = 0; f < NFAM; f++)
        if (put(d, FAMILY[f], PyFloat_FromDouble(c->limits[f])) < 0) goto fail;
    for (int f = 0; f < 2; f++)
        for (int p = 0; p < 4; p++)
            for (int sd = 0; sd < 2; sd++)
                if (set_item(d, tri_name(f, p, sd), PyFloat_FromDouble(c->r[TRMM + f][p].tile[sd])) < 0) goto fail;
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

static PyObject *
windows_dict(const Config *c)
{
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    for (int f = 0; f < 2; f++)
        for (int p = 0; p < 4; p++)
            for (int sd = 0; sd < 2; sd++) {
                const double *w = c->r[TRMM + f][p].window[sd];
                PyObject *v = w[0] > 0 ? Py_BuildValue("(ddd)", w[0], w[1], w[2]) : Py_NewRef(Py_None);
                if (set_item(d, tri_name(f, p, sd), v) < 0) {
                    Py_DECREF(d);
                    return NULL;
                }
            }
    return d;
}

/* Per routine, the pairs of `lim` of a range ever taken (hi > lo; rank_gemm: either limit above 0). */
static PyObject *
pairs_dict(const Config *c, int rank)
{
    PyObject *d = PyDict_New();
    for (int f = 0; d != NULL && f < NFAM; f++)
        for (int p = 0; p < 4; p++) {
            const double *v = rank ? c->r[f][p].rank_gemm : c->r[f][p].split;
            double lo = v[0], hi = v[1];
            if (rank ? !(lo > 0 || hi > 0) : !(hi > lo)) continue;
            if (set_item(d, routine_name(f, p), Py_BuildValue("(dd)", lo, hi)) < 0) {
                Py_CLEAR(d);
                break;
            }
        }
    return d;
}

PyObject *
fp_config(PyObject *mod, PyObject *unused)
{
    const Config *c = &fp_cfg;
    PyObject *d = PyDict_New(), *one;
    (void)mod;
    (void)unused;
    if (d == NULL) return NULL;
    if ((one = PyDict_New()) == NULL) goto fail;
    for (int f = 0; f < NFAM; f++)
        for (int p = 0; p < 4; p++)
            if (c->r[f][p].one_thread > 0
                && set_item(one, routine_name(f, p), PyFloat_FromDouble(c->r[f][p].one_thread)) < 0) {
                Py_DECREF(one);
                goto fail;
            }
    if (put(d, "enabled", PyBool_FromLong(c->enabled)) < 0
        || put(d, "contextvar", Py_NewRef(c->contextvar != NULL ? c->contextvar : Py_None)) < 0
        || put(d, "limits", limits_dict(c)) < 0 || put(d, "windows", windows_dict(c)) < 0
        || put(d, "entries", entries_dict(c, 0)) < 0 || put(d, "one_thread_entries", entries_dict(c, 1)) < 0
        || put(d, "one_thread", one) < 0
        || put(d, "split", pairs_dict(c, 0)) < 0 || put(d, "rank_gemm", pairs_dict(c, 1)) < 0
        || put(d, "pool_slot", PyLong_FromLong(c->pool_slot)) < 0
        || put(d, "get_num_threads", PyLong_FromVoidPtr((void *)c->get_num_threads)) < 0
        || put(d, "gil_flops", PyFloat_FromDouble(c->gil_flops)) < 0
        || put(d, "gil_elements", PyLong_FromLong(c->gil_elements)) < 0
        || put(d, "convert_max", PyLong_FromLong(c->convert_max)) < 0
        || put(d, "part_fraction", PyLong_FromLong(c->part_fraction)) < 0
        || put(d, "part_min", PyLong_FromLong(c->part_min)) < 0
        || put(d, "max_parts", PyLong_FromLong(c->max_parts)) < 0
        || put(d, "herk_copy_k", Py_BuildValue("(dd)", c->herk_copy_k[0], c->herk_copy_k[1])) < 0
        || put(d, "gpu_ask", PyFloat_FromDouble(c->gpu_ask)) < 0
        || put(d, "gpu_hook", Py_NewRef(c->gpu_hook != NULL ? c->gpu_hook : Py_None)) < 0)
        goto fail;
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

PyObject *
fp_stats(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return Py_BuildValue("{s:K,s:K}", "split_calls", fp_split_calls, "rank_gemm_calls", fp_rank_gemm_calls);
}
