/*
 * Level 3 of the small-call path (tileblas.blas._fastpath; _fp.h has the plan of the files), in stages over
 * one call descriptor (Call):
 *
 *   bind       the arguments, by the family's signature (SIG3: where each parameter sits, declared once
 *              per family as SciPy's f2py signature declares it): flags, scalars, operands, shapes, the
 *              output given; anything the path does not take as given leaves the call to Python here
 *   normalise  the layouts: a C-ordered operand is the Fortran-ordered transpose (flags flipped where the
 *              algebra allows; hemm/herk/her2k through the conjugate problem), others are copied
 *   decide     fp_decide (_fp_decide.c): the path
 *   execute    the copies, the output, and the path: one call, parts on the pool, strips, the gemm route
 *
 * Nothing is written before execute, and execute never declines.  Semantics are the Python
 * implementation's (SciPy's): the output is a new Fortran-ordered array unless overwrite_* is set and the
 * caller's array is already a Fortran-contiguous, aligned, writeable array of the routine's dtype, which is
 * then updated in place; an input that shares memory with that output is read from a copy of its own.
 *
 * Where the call as given is not one the path takes, operands of another dtype or rank 1 are converted as
 * the Python path converts them (convert_operand) and the stages run again on them (level3_small).
 */
#include "_fp.h"

unsigned long long fp_split_calls = 0, fp_rank_gemm_calls = 0;

typedef struct {
    Routine r;
    int fam;
    int prec;                          /* index into PREFIXES */
} Level3Object;

/* ------------------------------------------------------------------------------------ signatures */

/* Where each parameter of a family sits in its argument list (-1: the family has none), declared once per
 * family as the routine's signature (SciPy's order); `out` is the operand BLAS writes (c, or b of trmm/trsm). */
typedef struct {
    const char *signature;
    signed char nparams, alpha, a, b, beta, c, side, lower, trans_a, trans_b, trans, diag, overwrite, out;
} Sig3;

/* clang-format off */
static const Sig3 SIG3[NFAM] = {
    /*                                                                   n al  a  b be  c sd lo ta tb tr dg ow out */
    [GEMM]  = {"gemm(alpha, a, b, beta, c, trans_a, trans_b, overwrite_c)", 8, 0, 1, 2, 3, 4,-1,-1, 5, 6,-1,-1, 7, 4},
    [SYMM]  = {"symm(alpha, a, b, beta, c, side, lower, overwrite_c)",      8, 0, 1, 2, 3, 4, 5, 6,-1,-1,-1,-1, 7, 4},
    [HEMM]  = {"hemm(alpha, a, b, beta, c, side, lower, overwrite_c)",      8, 0, 1, 2, 3, 4, 5, 6,-1,-1,-1,-1, 7, 4},
    [SYRK]  = {"syrk(alpha, a, beta, c, trans, lower, overwrite_c)",        7, 0, 1,-1, 2, 3,-1, 5,-1,-1, 4,-1, 6, 3},
    [HERK]  = {"herk(alpha, a, beta, c, trans, lower, overwrite_c)",        7, 0, 1,-1, 2, 3,-1, 5,-1,-1, 4,-1, 6, 3},
    [SYR2K] = {"syr2k(alpha, a, b, beta, c, trans, lower, overwrite_c)",    8, 0, 1, 2, 3, 4,-1, 6,-1,-1, 5,-1, 7, 4},
    [HER2K] = {"her2k(alpha, a, b, beta, c, trans, lower, overwrite_c)",    8, 0, 1, 2, 3, 4,-1, 6,-1,-1, 5,-1, 7, 4},
    [TRMM]  = {"trmm(alpha, a, b, side, lower, trans_a, diag, overwrite_b)",8, 0, 1, 2,-1,-1, 3, 4, 5,-1,-1, 6, 7, 2},
    [TRSM]  = {"trsm(alpha, a, b, side, lower, trans_a, diag, overwrite_b)",8, 0, 1, 2,-1,-1, 3, 4, 5,-1,-1, 6, 7, 2},
};
/* clang-format on */

/* ----------------------------------------------------------------------------------- native calls */

typedef void (*gemm_t)(const char *, const char *, const int *, const int *, const int *, const void *,
                       const void *, const int *, const void *, const int *, const void *, void *,
                       const int *, size_t, size_t);
typedef void (*symm_t)(const char *, const char *, const int *, const int *, const void *, const void *,
                       const int *, const void *, const int *, const void *, void *, const int *, size_t,
                       size_t);
typedef void (*syrk_t)(const char *, const char *, const int *, const int *, const void *, const void *,
                       const int *, const void *, void *, const int *, size_t, size_t);
typedef void (*syr2k_t)(const char *, const char *, const int *, const int *, const void *, const void *,
                        const int *, const void *, const int *, const void *, void *, const int *, size_t,
                        size_t);
typedef void (*trmm_t)(const char *, const char *, const char *, const char *, const int *, const int *,
                       const void *, const void *, const int *, void *, const int *, size_t, size_t,
                       size_t, size_t);

/* One part: a gemm (f1, f2 = transa, transb), a symm/hemm (f1, f2 = side, uplo; k unused) or a trmm/trsm
 * (tri: f1-f4 = side, uplo, transa, diag; on c, b = c).  A symm/hemm or trmm/trsm part may first fill its
 * m x n piece of b (Fortran order) from bsrc (element (i, j) at i * bsr + j * bsc bytes), conjugated where
 * bconj; and conjugate its piece of c after the call (cconj; before it as well
 * where cpre): conj(A) conj(B) is conj(A B), the way a C-ordered Hermitian a is used without a copy. */
typedef struct {
    void *fn;
    int gemm, prec;
    char f1, f2, f3, f4; /* f3, f4: trans_a and diag of a trmm/trsm part (tri) */
    int tri;
    int m, n, k, lda, ldb, ldc;
    scalar_t alpha, beta;
    char *a, *b, *c;
    const char *bsrc;
    npy_intp bsr, bsc;
    int bconj, cconj, cpre;
} SplitJob;

static void
split_job(int i, void *p, int unused)
{
    SplitJob *j = (SplitJob *)p;
    (void)i;
    (void)unused;
    if (j->bsrc != NULL) copy_piece(j->b, j->ldb, j->bsrc, j->bsr, j->bsc, j->m, j->n, j->prec, j->bconj);
    if (j->cpre) conj_piece(j->c, j->ldc, j->m, j->n, j->prec);
    if (j->tri)  /* trmm/trsm on its piece of the output (b = c there), filled from bsrc first */
        ((trmm_t)j->fn)(&j->f1, &j->f2, &j->f3, &j->f4, &j->m, &j->n, &j->alpha, j->a, &j->lda, j->c, &j->ldc, 1, 1,
                        1, 1);
    else if (j->gemm)
        ((gemm_t)j->fn)(&j->f1, &j->f2, &j->m, &j->n, &j->k, &j->alpha, j->a, &j->lda, j->b, &j->ldb, &j->beta,
                        j->c, &j->ldc, 1, 1);
    else
        ((symm_t)j->fn)(&j->f1, &j->f2, &j->m, &j->n, &j->alpha, j->a, &j->lda, j->b, &j->ldb, &j->beta, j->c,
                        &j->ldc, 1, 1);
    if (j->cconj) conj_piece(j->c, j->ldc, j->m, j->n, j->prec);
}

/* ---------------------------------------------------------------------------------- the parts */

/* Run the parts `job` (jobs of elsize bytes) on the calling thread and the pool's workers, claimed by
 * whichever comes first (_pool.h), the GIL released: 1 when done, 0 when none was run (no such slot). */
static int
run_parts(const Path *p, pool_job_fn dojob, void *job, int jobs, size_t elsize)
{
    int rc, slot = fp_cfg.pool_slot;
    Py_BEGIN_ALLOW_THREADS
    pool_api->enter();
    rc = pool_api->run_parts(slot, dojob, jobs, elsize, job, 1); /* sleeping workers woken */
    pool_api->leave();
    Py_END_ALLOW_THREADS
    if (rc < 0) return 0;
    fp_split_calls++;
    return 1;
}

/* The call `whole` in the path's parts along its `len` rows (rows) or columns, part i's b and c advanced
 * by bstep and cstep bytes per row or column before it, each on the parts' entry point.  1 when done; 0
 * (nothing written) where the pool ran none. */
static int
run_split(const Path *p, const SplitJob *whole, int len, int rows, size_t bstep, size_t cstep)
{
    SplitJob job[MAX_PARTS];
    int jobs = p->parts, done = 0;
    for (int i = 0; i < jobs; i++) {
        int part = len / jobs + (i < len % jobs);
        job[i] = *whole;
        job[i].fn = p->part_fn;
        if (rows) job[i].m = part;
        else job[i].n = part;
        job[i].b += (size_t)done * bstep;
        job[i].c += (size_t)done * cstep;
        if (job[i].bsrc != NULL) job[i].bsrc += done * (rows ? whole->bsr : whole->bsc);
        done += part;
    }
    return run_parts(p, split_job, job, jobs, sizeof(SplitJob));
}

/* syrk/herk/syr2k/her2k split: the stored triangle of C in strips, one per thread, each a diagonal block
 * (a rank-k update of its own) and the rectangle beside it (one gemm; two for the 2k routines) between
 * it and the diagonal's start: rows r0..r1 and columns 0..r0 for uplo L, the transpose for U.  Strip
 * bounds n sqrt(i / jobs) give each the same flops.  The call's flags as the rank-k routine takes them
 * (after any transposition: trans 'N' has op(a) = a, n x k, else a is k x n); cconj/cpre conjugate the
 * strip's part of c after (and before) the calls, as the single call would do to the whole triangle. */
typedef struct {
    void *rk, *gm;
    int two, herm, prec;
    char uplo, trans;
    int n, k, lda, ldb, ldc, r0, r1;
    scalar_t alpha, beta;
    char *a, *b, *c;
    int cconj, cpre;
} RankJob;

static void
rank_conj(const RankJob *j, size_t es)
{
    int w = j->r1 - j->r0;
    char *c = j->c;
    conj_triangle(c + ((size_t)j->r0 + (size_t)j->r0 * j->ldc) * es, j->ldc, w, j->uplo == 'L', j->prec);
    if (j->r0 > 0) {
        if (j->uplo == 'L') conj_piece(c + (size_t)j->r0 * es, j->ldc, w, j->r0, j->prec);
        else conj_piece(c + (size_t)j->r0 * j->ldc * es, j->ldc, j->r0, w, j->prec);
    }
}

static void
rank_job(int i, void *p, int unused)
{
    RankJob *j = (RankJob *)p;
    size_t es = elsize(j->prec);
    int w = j->r1 - j->r0, r0 = j->r0;
    char h = j->herm ? 'C' : 'T', nn = 'N';
    /* op(x) rows r0..: x + r0 (trans 'N'), else columns r0.. of the k x n x */
    size_t off = j->trans == 'N' ? (size_t)r0 * es : (size_t)r0 * j->lda * es;
    size_t offb = j->trans == 'N' ? (size_t)r0 * es : (size_t)r0 * j->ldb * es;
    char *cd = j->c + ((size_t)r0 + (size_t)r0 * j->ldc) * es;
    /* gemm's scalars: herk's real alpha and herk/her2k's real beta as complex ones (real scalars are
     * stored in the first component); the second gemm of her2k takes conj(alpha) and beta 1 */
    scalar_t ga = j->alpha, gb = j->beta, ga2, g1;
    (void)i;
    (void)unused;
    memset(&g1, 0, sizeof g1);
    if (j->prec == 0 || j->prec == 2) g1.f = 1.0f;
    else g1.d = 1.0;
    if (j->herm) {
        if (j->prec == 2) { gb.cf[1] = 0.0f; if (!j->two) ga.cf[1] = 0.0f; }
        else { gb.cd[1] = 0.0; if (!j->two) ga.cd[1] = 0.0; }
    }
    ga2 = ga;
    if (j->herm && j->two) conj_scalar(&ga2, j->prec);
    if (j->cpre) rank_conj(j, es);
    if (j->two)
        ((syr2k_t)j->rk)(&j->uplo, &j->trans, &w, &j->k, &j->alpha, j->a + off, &j->lda, j->b + offb, &j->ldb,
                         &j->beta, cd, &j->ldc, 1, 1);
    else
        ((syrk_t)j->rk)(&j->uplo, &j->trans, &w, &j->k, &j->alpha, j->a + off, &j->lda, &j->beta, cd, &j->ldc, 1,
                        1);
    if (r0 > 0) {
        /* L: C[r0:r1, :r0] = op(a)[r0:r1] op(b)[:r0]^H (+ op(b)[r0:r1] op(a)[:r0]^H);
         * U: C[:r0, r0:r1] = op(a)[:r0] op(b)[r0:r1]^H (+ ...) */
        int lower = j->uplo == 'L', m = lower ? w : r0, n = lower ? r0 : w;
        char ta = j->trans == 'N' ? nn : h, tb = j->trans == 'N' ? h : nn;
        char *cr = j->c + (lower ? (size_t)r0 * es : (size_t)r0 * j->ldc * es);
        char *x1 = lower ? j->a + off : j->a, *y1 = lower ? (j->two ? j->b : j->a) : (j->two ? j->b + offb : j->a + off);
        int ldy = j->two ? j->ldb : j->lda;
        ((gemm_t)j->gm)(&ta, &tb, &m, &n, &j->k, &ga, x1, &j->lda, y1, &ldy, &gb, cr, &j->ldc,
                        1, 1);
        if (j->two) {
            char *x2 = lower ? j->b + offb : j->b, *y2 = lower ? j->a : j->a + off;
            ((gemm_t)j->gm)(&ta, &tb, &m, &n, &j->k, &ga2, x2, &j->ldb, y2, &j->lda, &g1, cr, &j->ldc, 1, 1);
        }
    }
    if (j->cconj) rank_conj(j, es);
}

/* A rank-k call in the path's strips (1), else nothing written (0). */
static int
run_rank_split(const Path *p, const RankJob *whole)
{
    RankJob job[MAX_PARTS];
    int jobs = p->parts;
    for (int i = 0; i < jobs; i++) {
        job[i] = *whole;
        job[i].rk = p->part_fn;
        job[i].gm = p->part_gemm;
        job[i].r0 = (int)(whole->n * sqrt((double)i / jobs) + 0.5);
        job[i].r1 = i + 1 == jobs ? whole->n : (int)(whole->n * sqrt((double)(i + 1) / jobs) + 0.5);
    }
    return run_parts(p, rank_job, job, jobs, sizeof(RankJob));
}

/* Real syrk/syr2k with trans 'N' (after any transposition) and a new c, as the path's gemm route: one gemm
 * (two for syr2k) over the whole n x n C instead of the rank-k call, the other triangle zeroed after,
 * in the path's column parts at once on the pool, else as one call.  OpenBLAS's gemm has small-matrix
 * kernels (a product of up to about 100^3 is computed without packing); its syrk/syr2k drivers pack and
 * walk the triangle block by block, so that at small orders they take longer than gemm takes for twice
 * the flops (the figures, under rank_gemm:
 * docs/measurements/drop-in.md, "Why each limit: the figures behind the small-call path's defaults"). */
/* The work of the gemm route on columns j0..j1 of C (all of them, or one part of a split): the gemm of
 * those columns (two for syr2k: alpha a b^T + alpha b a^T), then their part of the other triangle zeroed.
 * Each part does both for its own columns on its own thread: C written by one thread and zeroed by
 * another cost more than the gemm (the figures, under rank_gemm:
 * docs/measurements/drop-in.md, "Why each limit: the figures behind the small-call path's defaults"). */
typedef struct {
    void *fn;
    int prec, two, lower;
    int n, k, lda, ldb, ldc, j0, j1;
    scalar_t alpha;
    char *a, *b, *c;
} RankGemmJob;

static void
rank_gemm_job(int i, void *p, int unused)
{
    RankGemmJob *j = (RankGemmJob *)p;
    size_t es = elsize(j->prec);
    int w = j->j1 - j->j0, ldy = j->two ? j->ldb : j->lda;
    char *y = j->two ? j->b : j->a, *cj = j->c + (size_t)j->j0 * j->ldc * es, ta = 'N', tb = 'T';
    scalar_t zero, one;
    (void)i;
    (void)unused;
    memset(&zero, 0, sizeof zero);
    one = zero;
    if (j->prec == 0) one.f = 1.0f;
    else one.d = 1.0;
    /* columns j0.. of C take rows j0.. of the n x k a and b (columns of a^T, b^T) */
    ((gemm_t)j->fn)(&ta, &tb, &j->n, &w, &j->k, &j->alpha, j->a, &j->lda, y + j->j0 * es, &ldy, &zero, cj, &j->ldc,
                    1, 1);
    if (j->two)
        ((gemm_t)j->fn)(&ta, &tb, &j->n, &w, &j->k, &j->alpha, j->b, &j->ldb, j->a + j->j0 * es, &j->lda, &one, cj,
                        &j->ldc, 1, 1);
    for (int c = j->j0; c < j->j1; c++) {
        char *col = j->c + (size_t)c * j->ldc * es;
        if (j->lower) memset(col, 0, (size_t)c * es);
        else memset(col + (size_t)(c + 1) * es, 0, (size_t)(j->n - c - 1) * es);
    }
}

static inline void
rank_by_gemm(const Path *p, const Call *c, char *a, int lda, char *b, int ldb, char *out, int ldc)
{
    int n = c->n;
    RankGemmJob whole = {.fn = p->fn, .prec = c->prec, .two = c->fam == SYR2K, .lower = c->lower, .n = n,
                         .k = c->k, .lda = lda, .ldb = ldb, .ldc = ldc, .j0 = 0, .j1 = n, .alpha = c->alpha, .a = a,
                         .b = b, .c = out};
    RankGemmJob job[MAX_PARTS];
    int jobs = p->parts, done = 0;
    fp_rank_gemm_calls++;
    for (int i = 0; i < jobs; i++) {
        int part = n / jobs + (i < n % jobs);
        job[i] = whole;
        job[i].fn = p->part_fn;
        job[i].j0 = done;
        job[i].j1 = done += part;
    }
    if (jobs > 0 && run_parts(p, rank_gemm_job, job, jobs, sizeof(RankGemmJob))) return;
    RUN_IF(p->nogil, rank_gemm_job(0, &whole, 0));
}

/* Whether a runtime is in force in this context (``with tileblas.Runtime(...)``): its calls are the
 * runtime's (the Python path); also where that cannot be read. */
static int
runtime_in_force(void)
{
    PyObject *cur = NULL;
    if (fp_cfg.contextvar == NULL) return 0;
    if (PyContextVar_Get(fp_cfg.contextvar, Py_None, &cur) < 0) {
        PyErr_Clear();
        return 1;
    }
    Py_XDECREF(cur);
    return cur != Py_None;
}

/* Whether the C path is closed to this routine's calls now (why, or NULL): off, no entry point, declined
 * in this thread, or a runtime in force. */
static const char *
level3_closed(const Level3Object *self)
{
    if (!fp_cfg.enabled || fp_cfg.r[self->fam][self->prec].entry == NULL) return "off";
    if (fp_declining && fp_declined) return "declined";
    if (runtime_in_force()) return "runtime";
    return NULL;
}

/* ------------------------------------------------------------------------------------------- bind */

/* The call's arguments, by the family's signature, into the descriptor: 1, or 0 where the path does not
 * take them as given (Python path; nothing written). */
static int
bind(int fam, int prec, PyObject *const *args, Call *c)
{
    const Sig3 *s = &SIG3[fam];
    int cplx = prec >= 2, two = fam == SYR2K || fam == HER2K;
    PyArrayObject *a, *b = NULL, *cg;
    c->fam = fam;
    c->prec = prec;
    c->cplx = cplx;
    /* flags: None is 0; out of range or not an integer: Python path */
    c->side = s->side >= 0 ? get_flag(args[s->side], 1) : 0;
    c->lower = s->lower >= 0 ? get_flag(args[s->lower], 1) : 0;
    c->trans_a = s->trans_a >= 0 ? get_flag(args[s->trans_a], 2) : 0;
    c->trans_b = s->trans_b >= 0 ? get_flag(args[s->trans_b], 2) : 0;
    c->trans = s->trans >= 0 ? get_flag(args[s->trans], 2) : 0;
    c->diag = s->diag >= 0 ? get_flag(args[s->diag], 1) : 0;
    c->overwrite = get_overwrite(args[s->overwrite]);
    if ((c->side | c->lower | c->trans_a | c->trans_b | c->trans | c->diag | c->overwrite) < 0) return 0;
    if (!cplx) { /* a real routine's conjugate transpose is its transpose */
        if (c->trans_a == 2) c->trans_a = 1;
        if (c->trans_b == 2) c->trans_b = 1;
    }
    else if (s->trans >= 0 && ((fam == HERK || fam == HER2K) ? c->trans == 1 : c->trans == 2))
        return 0; /* BLAS rejects these (trans 'T' of herk, 'C' of csyrk): Python raises */
    /* scalars: herk's alpha and herk/her2k's beta are real */
    memset(&c->alpha, 0, sizeof c->alpha);
    memset(&c->beta, 0, sizeof c->beta);
    if (!get_scalar(args[s->alpha], prec, fam == HERK, &c->alpha)) return 0;
    if (s->beta >= 0 && !get_beta(args[s->beta], prec, fam == HERK || fam == HER2K, &c->beta)) return 0;
    c->beta_zero = is_zero(&c->beta, prec);
    /* operands and shapes */
    if ((a = plain_matrix(args[s->a], prec)) == NULL) return 0;
    if (s->b >= 0 && (b = plain_matrix(args[s->b], prec)) == NULL) return 0;
    switch (fam) {
    case GEMM: /* op(a) m x k, op(b) k x n */
        c->m = (int)PyArray_DIM(a, c->trans_a ? 1 : 0);
        c->k = (int)PyArray_DIM(a, c->trans_a ? 0 : 1);
        c->n = (int)PyArray_DIM(b, c->trans_b ? 0 : 1);
        if (PyArray_DIM(b, c->trans_b ? 1 : 0) != c->k) return 0;
        c->flops = 2.0 * c->m * c->n * c->k;
        break;
    case SYMM:
    case HEMM: /* a square of order k, b m x n, k = m (side L) or n */
    case TRMM:
    case TRSM:
        c->k = (int)PyArray_DIM(a, 0);
        c->m = (int)PyArray_DIM(b, 0);
        c->n = (int)PyArray_DIM(b, 1);
        if (PyArray_DIM(a, 1) != c->k || (c->side ? c->n : c->m) != c->k) return 0;
        c->flops = (fam == SYMM || fam == HEMM ? 2.0 : 1.0) * c->m * c->n * c->k;
        break;
    default: /* the syrk family: op(a) (and op(b)) n x k */
        if (two && (PyArray_DIM(b, 0) != PyArray_DIM(a, 0) || PyArray_DIM(b, 1) != PyArray_DIM(a, 1))) return 0;
        c->n = c->m = (int)PyArray_DIM(a, c->trans ? 1 : 0);
        c->k = (int)PyArray_DIM(a, c->trans ? 0 : 1);
        c->flops = (two ? 2.0 : 1.0) * c->n * (c->n + 1.0) * c->k;
        break;
    }
    if (cplx) c->flops *= 4.0;
    c->a.arr = a;
    c->b.arr = b;
    /* the output given: None (a new one), else a plain matrix of the output's shape */
    c->c = args[s->out];
    if (c->c != Py_None && s->c >= 0) {
        if ((cg = plain_matrix(c->c, prec)) == NULL || PyArray_DIM(cg, 0) != c->m || PyArray_DIM(cg, 1) != c->n)
            return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------------------------- normalise */

/* An operand read as op(x) (trans 0, 1 or 2): a C-ordered one is the Fortran-ordered transpose, passed
 * with the flag flipped ('N' <-> 'T'; a conjugate without transpose cannot be: copied), a Fortran-ordered
 * one as it is, any other copied to Fortran order.  BLAS's flag for it. */
static inline char
operand_op(Operand *x, int trans)
{
    x->layout = layout(x->arr);
    if (x->layout == 'C' && trans != 2) {
        x->copy = 0;
        x->ld = (int)PyArray_DIM(x->arr, 1);
        return trans ? 'N' : 'T';
    }
    x->copy = x->layout != 'F';
    x->ld = ld(x->arr);
    return "NTC"[trans];
}

/* The layouts, as BLAS takes them: flags, leading dimensions, which operands are copied. */
static void
normalise(Call *c, const Config *cfg)
{
    int herm = c->fam == HERK || c->fam == HER2K, two = c->fam == SYR2K || c->fam == HER2K;
    c->f_uplo = c->lower ? 'L' : 'U';
    c->f_side = c->side ? 'R' : 'L';
    c->f_diag = c->diag ? 'U' : 'N';
    c->conj = 0;
    c->cbeta = c->c != Py_None && !c->beta_zero; /* c given and read */
    c->fresh = 0;
    c->b.copy = 0;
    c->b.ld = 1;
    switch (c->fam) {
    case GEMM:
        c->f_ta = operand_op(&c->a, c->trans_a);
        c->f_tb = operand_op(&c->b, c->trans_b);
        break;
    case SYMM:
    case HEMM:
        /* a C-ordered a is a's transpose in Fortran order, in the other triangle: a itself for symm, conj(a)
         * for hemm, used through conj(alpha conj(a) conj(b) + conj(beta) conj(c)): b copied conjugated
         * (by the parts, execute), c conjugated after the call (and before, where beta is not zero) */
        c->a.layout = layout(c->a.arr);
        if (c->a.layout == 'C') {
            c->f_uplo = c->lower ? 'U' : 'L';
            c->a.copy = 0;
            c->a.ld = c->k;
            c->conj = c->fam == HEMM;
        }
        else {
            c->a.copy = c->a.layout != 'F';
            c->a.ld = ld(c->a.arr);
        }
        if (c->conj) {
            conj_scalar(&c->alpha, c->prec);
            conj_scalar(&c->beta, c->prec);
        }
        break;
    case TRMM:
    case TRSM: /* a C-ordered a: the Fortran-ordered transpose, other triangle, trans flipped */
        c->f_ta = operand_op(&c->a, c->trans_a);
        if (c->a.layout == 'C' && c->trans_a != 2) {
            c->f_uplo = c->lower ? 'U' : 'L';
            c->a.ld = c->k;
        }
        break;
    default: {
        /* C-ordered operands (both of them): the transposed problem, trans flipped; for herk/her2k that
         * problem is the conjugate of the call's (a C-ordered a is a^T in Fortran order: a^T conj(a) is
         * conj(a a^H)), so c is conjugated before (where it is read) and after, and her2k's alpha.  Where
         * k is small against n, copies of the n x k operands cost less (decide's rule). */
        int transposed;
        c->f_trans = c->trans == 0 ? 'N' : ((c->trans == 2 && c->cplx) ? 'C' : 'T');
        c->a.layout = layout(c->a.arr);
        if (two) c->b.layout = layout(c->b.arr);
        transposed = c->a.layout == 'C' && (!two || c->b.layout == 'C');
        if (transposed && herm && fp_copy_beats_conjugate(c, cfg)) transposed = 0;
        if (transposed) {
            c->f_trans = c->f_trans == 'N' ? (herm ? 'C' : 'T') : 'N';
            c->a.copy = 0;
            c->a.ld = (int)PyArray_DIM(c->a.arr, 1);
            if (two) c->b.ld = (int)PyArray_DIM(c->b.arr, 1);
            c->conj = herm;
            if (c->conj && two) conj_scalar(&c->alpha, c->prec);
        }
        else {
            c->a.copy = c->a.layout != 'F';
            c->a.ld = ld(c->a.arr);
            if (two) {
                c->b.copy = c->b.layout != 'F';
                c->b.ld = ld(c->b.arr);
            }
        }
        /* a new c that BLAS writes whole in its triangle (beta zero): only the other triangle is zeroed */
        c->fresh = c->c == Py_None && c->beta_zero && c->k > 0;
        break;
    }
    }
}

/* --------------------------------------------------------------------------------------- execute */

/* What execute holds: operands copied to Fortran order, inputs copied because they share memory with an
 * output written in place, the output. */
typedef struct {
    PyArrayObject *acopy, *bcopy, *unalias[2], *out;
} Held;

/* The held references dropped; the output returned (NULL where execute failed: its exception stands). */
static inline PyObject *
release(Held *h, int ok)
{
    Py_XDECREF(h->acopy);
    Py_XDECREF(h->bcopy);
    Py_XDECREF(h->unalias[0]);
    Py_XDECREF(h->unalias[1]);
    if (!ok) Py_CLEAR(h->out);
    return (PyObject *)h->out;
}

/* The operand as BLAS reads it: the caller's array, or its copy to Fortran order (NULL on failure). */
static inline PyArrayObject *
operand(const Call *c, const Operand *x, PyArrayObject **copy)
{
    if (!x->copy) return x->arr;
    return *copy = fortran_copy_as(x->arr, c->prec, 0);
}

static PyObject *
execute_gemm(const Call *c, const Path *p)
{
    Held h = {NULL, NULL, {NULL, NULL}, NULL};
    PyArrayObject *ins[2];
    int m = c->m, n = c->n, k = c->k, lda = c->a.ld, ldb = c->b.ld, ldc;
    char ta = c->f_ta, tb = c->f_tb;
    if ((ins[0] = operand(c, &c->a, &h.acopy)) == NULL || (ins[1] = operand(c, &c->b, &h.bcopy)) == NULL)
        return release(&h, 0);
    if ((h.out = output(c->c, c->prec, c->overwrite, m, n, !c->beta_zero, ins, 2, h.unalias)) == NULL)
        return release(&h, 0);
    ldc = ld(h.out);
    if (p->kind == PATH_SPLIT) {
        /* columns of C and of op(b) (columns of b for 'N', rows for 'T', 'C') */
        size_t es = (size_t)PyArray_ITEMSIZE(h.out);
        SplitJob whole = {.gemm = 1, .prec = c->prec, .f1 = ta, .f2 = tb, .m = m, .n = n, .k = k, .lda = lda,
                          .ldb = ldb, .ldc = ldc, .alpha = c->alpha, .beta = c->beta, .a = PyArray_BYTES(ins[0]),
                          .b = PyArray_BYTES(ins[1]), .c = PyArray_BYTES(h.out)};
        if (run_split(p, &whole, n, 0, (tb == 'N' ? (size_t)ldb : 1) * es, (size_t)ldc * es)) return release(&h, 1);
    }
    RUN_IF(p->nogil, ((gemm_t)p->fn)(&ta, &tb, &m, &n, &k, &c->alpha, PyArray_DATA(ins[0]), &lda,
                                     PyArray_DATA(ins[1]), &ldb, &c->beta, PyArray_DATA(h.out), &ldc, 1, 1));
    return release(&h, 1);
}

static PyObject *
execute_symm(const Call *c, const Path *p)
{
    Held h = {NULL, NULL, {NULL, NULL}, NULL};
    PyArrayObject *ins[2];
    SplitJob whole;
    size_t es;
    if ((ins[0] = operand(c, &c->a, &h.acopy)) == NULL) return release(&h, 0);
    ins[1] = c->b.arr;
    if ((h.out = output(c->c, c->prec, c->overwrite, c->m, c->n, !c->beta_zero, ins, 2, h.unalias)) == NULL)
        return release(&h, 0);
    memset(&whole, 0, sizeof whole);
    whole.prec = c->prec;
    whole.f1 = c->f_side;
    whole.f2 = c->f_uplo;
    whole.m = c->m;
    whole.n = c->n;
    whole.lda = c->a.ld;
    whole.ldb = c->m;
    whole.ldc = ld(h.out);
    whole.alpha = c->alpha;
    whole.beta = c->beta;
    whole.a = PyArray_BYTES(ins[0]);
    whole.c = PyArray_BYTES(h.out);
    whole.cconj = c->conj;
    whole.cpre = c->conj && c->cbeta;
    if (layout(ins[1]) == 'F' && !c->conj) {
        whole.b = PyArray_BYTES(ins[1]);
        whole.ldb = ld(ins[1]);
    }
    else {
        /* b copied to Fortran order (conjugated for hemm's conj) by each part, its own piece */
        if ((h.bcopy = fortran_empty(ins[1])) == NULL) return release(&h, 0);
        whole.b = PyArray_BYTES(h.bcopy);
        whole.bsrc = PyArray_BYTES(ins[1]);
        whole.bsr = PyArray_STRIDE(ins[1], 0);
        whole.bsc = PyArray_STRIDE(ins[1], 1);
        whole.bconj = c->conj;
    }
    es = (size_t)PyArray_ITEMSIZE(h.out);
    /* columns of C for side L, rows for side R */
    if (p->kind == PATH_SPLIT
        && run_split(p, &whole, c->side ? c->m : c->n, c->side, c->side ? es : (size_t)whole.ldb * es,
                     c->side ? es : (size_t)whole.ldc * es))
        return release(&h, 1);
    whole.fn = p->fn;
    RUN_IF(p->nogil, split_job(0, &whole, 0));
    return release(&h, 1);
}

static PyObject *
execute_rank(const Call *c, const Path *p)
{
    Held h = {NULL, NULL, {NULL, NULL}, NULL};
    PyArrayObject *ins[2] = {NULL, NULL};
    int two = c->fam == SYR2K || c->fam == HER2K, n = c->n, k = c->k, lda = c->a.ld, ldb = c->b.ld, ldc;
    char uplo = c->f_uplo, trans = c->f_trans;
    char *a, *b, *out;
    if ((ins[0] = operand(c, &c->a, &h.acopy)) == NULL || (two && (ins[1] = operand(c, &c->b, &h.bcopy)) == NULL))
        return release(&h, 0);
    if ((h.out = output(c->c, c->prec, c->overwrite, n, n, !c->fresh, ins, two ? 2 : 1, h.unalias)) == NULL)
        return release(&h, 0);
    ldc = ld(h.out);
    a = PyArray_BYTES(ins[0]);
    b = two ? PyArray_BYTES(ins[1]) : NULL;
    out = PyArray_BYTES(h.out);
    if (p->kind == PATH_RANK_GEMM) {
        rank_by_gemm(p, c, a, lda, b, ldb, out, ldc);
        return release(&h, 1);
    }
    if (c->fresh) zero_other_triangle(out, ldc, n, c->lower, elsize(c->prec));
    if (p->kind == PATH_SPLIT) {
        RankJob whole = {.two = two, .herm = c->fam == HERK || c->fam == HER2K, .prec = c->prec, .uplo = uplo,
                         .trans = trans, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc, .alpha = c->alpha,
                         .beta = c->beta, .a = a, .b = b, .c = out, .cconj = c->conj, .cpre = c->conj && c->cbeta};
        if (run_rank_split(p, &whole)) return release(&h, 1);
    }
    if (c->conj && c->cbeta) conj_triangle(out, ldc, n, c->lower, c->prec);
    if (two)
        RUN_IF(p->nogil,
               ((syr2k_t)p->fn)(&uplo, &trans, &n, &k, &c->alpha, a, &lda, b, &ldb, &c->beta, out, &ldc, 1, 1));
    else
        RUN_IF(p->nogil, ((syrk_t)p->fn)(&uplo, &trans, &n, &k, &c->alpha, a, &lda, &c->beta, out, &ldc, 1, 1));
    if (c->conj) conj_triangle(out, ldc, n, c->lower, c->prec);
    return release(&h, 1);
}

static PyObject *
execute_tri(const Call *c, const Path *p)
{
    Held h = {NULL, NULL, {NULL, NULL}, NULL};
    PyArrayObject *ins[1];
    int fill = 0, ldb;
    size_t es;
    if ((ins[0] = operand(c, &c->a, &h.acopy)) == NULL) return release(&h, 0);
    /* b written in place where allowed; else a new b, which the parts (or the one call) fill from the
     * caller's, each its own piece, on its thread (copied by this thread first, the other thread's half
     * crossed cores after the copy) */
    if (writes_in_place(c->b.arr, c->overwrite)) h.out = output(c->c, c->prec, c->overwrite, c->m, c->n, 0, ins, 1,
                                                               h.unalias);
    else {
        h.out = fortran_empty(c->b.arr);
        fill = 1;
    }
    if (h.out == NULL) return release(&h, 0);
    ldb = ld(h.out);
    es = (size_t)PyArray_ITEMSIZE(h.out);
    {
        SplitJob whole = {.tri = 1, .prec = c->prec, .f1 = c->f_side, .f2 = c->f_uplo, .f3 = c->f_ta,
                          .f4 = c->f_diag, .m = c->m, .n = c->n, .lda = c->a.ld, .ldb = ldb, .ldc = ldb,
                          .alpha = c->alpha, .a = PyArray_BYTES(ins[0]), .b = PyArray_BYTES(h.out),
                          .c = PyArray_BYTES(h.out)};
        if (fill) {
            whole.bsrc = PyArray_BYTES(c->b.arr);
            whole.bsr = PyArray_STRIDE(c->b.arr, 0);
            whole.bsc = PyArray_STRIDE(c->b.arr, 1);
        }
        /* columns of b for side L, rows for side R */
        if (p->kind == PATH_SPLIT && run_split(p, &whole, c->side ? c->m : c->n, c->side,
                                               c->side ? es : (size_t)ldb * es, c->side ? es : (size_t)ldb * es))
            return release(&h, 1);
        whole.fn = p->fn;
        RUN_IF(p->nogil, split_job(0, &whole, 0));
    }
    return release(&h, 1);
}

static PyObject *
execute(const Call *c, const Path *p)
{
    switch (c->fam) {
    case GEMM: return execute_gemm(c, p);
    case SYMM:
    case HEMM: return execute_symm(c, p);
    case TRMM:
    case TRSM: return execute_tri(c, p);
    default: return execute_rank(c, p);
    }
}

/* ------------------------------------------------------------------------------------ the stages */

/* A call, as given: bind -> normalise -> decide -> execute.  The result; NotImplemented (nothing written)
 * where a stage leaves it to the Python path; NULL with an exception.  With `planned`, the stages stop
 * before execute: the path (and the descriptor, in *call) are written there, None returned. */
static PyObject *
level3_call(Level3Object *self, PyObject *const *args, Path *planned, Call *call)
{
    Call c;
    Path p;
    const char *closed = level3_closed(self);
    if (closed != NULL || !bind(self->fam, self->prec, args, &c)) {
        if (planned != NULL) {
            Path py = {PATH_PYTHON, 0, NULL, NULL, NULL, 0, closed != NULL ? closed : "arguments"};
            *planned = py;
        }
        Py_RETURN_NOTIMPLEMENTED;
    }
    normalise(&c, &fp_cfg);
    p = fp_decide(&c, &fp_cfg);
    if (planned != NULL) {
        *planned = p;
        *call = c;
        Py_RETURN_NONE;
    }
    if (p.kind == PATH_PYTHON) Py_RETURN_NOTIMPLEMENTED;
    return execute(&c, &p);
}

/* The small-call path given all the routine's arguments in order: the result, or NotImplemented having
 * written nothing, or NULL with an exception.  Where the call as given is not one the C path takes,
 * operands of another dtype or rank 1 are converted (convert_operand) and the call is tried again with
 * them (a call that declines has written nothing).  The result has the rank the output was given
 * with (a vector b of trmm/trsm stays a vector), as in SciPy.  With `planned`: decide() only. */
static PyObject *
level3_small(Level3Object *self, PyObject *const *args, Path *planned, Call *call)
{
    const Sig3 *s;
    signed char at[3]; /* the operands (-1: none); s->out is the one written */
    int any = 0, inplace = 0, io = -1, ow;
    PyObject *conv[3] = {NULL, NULL, NULL}, *given[MAX_PARAMS], *r;
    r = level3_call(self, args, planned, call);  /* the common call: nothing to convert, nothing more to pay */
    if (r != Py_NotImplemented || level3_closed(self) != NULL) return r;
    s = &SIG3[self->fam];
    at[0] = s->a;
    at[1] = s->b;
    at[2] = s->c;
    if ((ow = get_overwrite(args[s->overwrite])) < 0) return r;  /* not an integer: the Python path names it */
    for (int i = 0; i < 3; i++) {
        if (at[i] < 0 || !PyArray_CheckExact(args[at[i]])) continue;
        conv[i] = convert_operand(args[at[i]], self->prec, at[i] == s->out, ow > 0, &inplace);
        any |= conv[i] != NULL;
        if (conv[i] != NULL && at[i] == s->out) io = i;
    }
    if (!any) return r;  /* NotImplemented: the Python path */
    Py_DECREF(r);
    memcpy(given, args, (size_t)s->nparams * sizeof *given);
    for (int i = 0; i < 3; i++)
        if (conv[i] != NULL) given[at[i]] = conv[i];
    if (io >= 0) given[s->overwrite] = Py_True;  /* the output is a copy of our own or may be written: in place */
    r = level3_call(self, given, planned, call);
    if (planned == NULL && io >= 0 && r != NULL && r != Py_NotImplemented
        && PyArray_NDIM((PyArrayObject *)args[s->out]) == 1) {
        PyObject *vec;
        if (inplace) {  /* the caller's vector itself, as the Python path returns it */
            vec = args[s->out];
            Py_INCREF(vec);
        }
        else if (r == conv[io] && PyArray_BASE((PyArrayObject *)r) != NULL
                 && PyArray_Check(PyArray_BASE((PyArrayObject *)r))
                 && PyArray_NDIM((PyArrayObject *)PyArray_BASE((PyArrayObject *)r)) == 1) {
            /* the column of a vector of our own (convert_operand), written in place: that vector, which
             * owns its data as SciPy's result does */
            vec = PyArray_BASE((PyArrayObject *)r);
            Py_INCREF(vec);
        }
        else {
            npy_intp dims[1] = {PyArray_DIM((PyArrayObject *)r, 0)};
            PyArray_Dims shape = {dims, 1};
            vec = PyArray_Newshape((PyArrayObject *)r, &shape, NPY_FORTRANORDER);
        }
        Py_DECREF(r);
        r = vec;
    }
    for (int i = 0; i < 3; i++) Py_XDECREF(conv[i]);
    return r;
}

static PyObject *
level3_run(Routine *routine, PyObject *const *args)
{
    return level3_small((Level3Object *)routine, args, NULL, NULL);
}

/* _fastpath.decide(routine, *args, **kwargs): the path the call routine(*args, **kwargs) takes, from the
 * same stages, without running it (operands the path would convert are converted, and dropped). */
PyObject *
fp_decide_py(PyObject *mod, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Level3Object *self;
    PyObject *slot[MAX_PARAMS], *r;
    PyObject *const *bound;
    Path p = {PATH_PYTHON, 0, NULL, NULL, NULL, 0, "binding"};
    Call c;
    (void)mod;
    if (nargs < 1 || !PyObject_TypeCheck(args[0], &Level3Type)) {
        PyErr_Format(PyExc_TypeError, "decide(routine, *args, **kwargs): routine must be a Level-3 routine of "
                     "tileblas.blas (a Level3 object), got %R", nargs < 1 ? Py_None : args[0]);
        return NULL;
    }
    self = (Level3Object *)args[0];
    bound = bind_args(&self->r.front, self->r.nparams, args + 1, nargs - 1, kwnames, slot);
    if (bound == NULL) return fp_path_dict(&p, NULL);  /* the routine hands such a call to Python as made */
    r = level3_small(self, bound, &p, &c);
    if (r == NULL) return NULL;
    Py_DECREF(r);
    return fp_path_dict(&p, r == Py_None ? &c : NULL);
}

/* ------------------------------------------------------------------------------------ the type */

static PyObject *
level3_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    const char *fam, *prefix;
    Level3Object *self;
    int f = -1, p = -1;
    static char *kwlist[] = {"family", "prefix", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ss", kwlist, &fam, &prefix))
        return NULL;
    for (int i = 0; i < NFAM; i++)
        if (strcmp(fam, FAMILY[i]) == 0) f = i;
    if (prefix[0] != '\0' && prefix[1] == '\0') p = prefix_index(prefix[0]);
    if (f < 0 || p < 0) {
        PyErr_Format(PyExc_ValueError, "unknown Level-3 routine %s%s", prefix, fam);
        return NULL;
    }
    if ((f == HEMM || f == HERK || f == HER2K) && p < 2) {
        PyErr_Format(PyExc_ValueError, "%s%s does not exist (Hermitian routines are complex)", prefix, fam);
        return NULL;
    }
    self = (Level3Object *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->fam = f;
    self->prec = p;
    if (routine_init(&self->r, level3_run, SIG3[f].nparams, NULL, NULL, NULL, "Level3") < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* "<tileblas small-call path of dgemm>"; with a front, the routine's name */
static PyObject *
level3_repr(Level3Object *self)
{
    if (self->r.front.fallback != NULL) return front_repr((PyObject *)self);
    return PyUnicode_FromFormat("<tileblas small-call path of %c%s>", PREFIXES[self->prec], FAMILY[self->fam]);
}

PyTypeObject Level3Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tileblas.blas._fastpath.Level3",
    .tp_basicsize = sizeof(Level3Object),
    .tp_doc = "Level3(family, prefix): the small-call path of one Level-3 routine; called with all the\n"
              "routine's arguments positionally, it returns the result or NotImplemented (Python path).\n"
              "path.front(fallback, names, defaults) is the routine itself: called as users call it, it runs\n"
              "the small-call path or hands the call, as made, to fallback (the Python implementation).",
    .tp_new = level3_new,
    .tp_repr = (reprfunc)level3_repr,
    ROUTINE_TYPE_SLOTS,
};
