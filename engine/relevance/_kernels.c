/* Compiled inner loops of the ranked recall (engine.relevance.kernels says why).

Each function computes exactly what its NumPy twin computes, float for float: the same
IEEE double operations in the same order, no fused multiply-add (built with
-ffp-contract=off), tf parts rounded to float32 where the twin rounds them. Every index
read from a buffer is checked against the buffer's length first: a damaged array makes
a function raise ValueError, never read outside memory.

Scratch buffers belong to the caller (one query at a time per index, like everything of
a session) and are left as they were found: `acc` all zeros. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define K1 1.2
#define B 0.75
#define TABLED 8
#define TF_ESCAPE 255
#define SUM_SLACK (1 + 1e-9) /* a bound on a sum against float64 rounding */

/* BM25's tf (k1 + 1) / (tf + k1 (1 - b + b len / avg)), rounded to float32: the
   operations of engine.relevance.passages.length_norms and tf_parts, in their order. */
static inline float tf_part(double tf, double len, double avg_q) {
    double norm = K1 * ((1.0 - B) + (B * len) / avg_q);
    return (float)((tf * (K1 + 1.0)) / (tf + norm));
}

typedef struct {
    Py_buffer view;
    int held;
} Buf;

static int get_buf(PyObject *obj, Buf *b, Py_ssize_t itemsize, const char *what) {
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    b->held = 1;
    if (itemsize && b->view.len % itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a whole number of items", what,
                     b->view.len);
        return -1;
    }
    return 0;
}

static void drop_buf(Buf *b) {
    if (b->held) {
        PyBuffer_Release(&b->view);
        b->held = 0;
    }
}

/* A min-heap of the k largest values seen: heap[0] is the k-th largest once full. */
static inline void heap_push(double *heap, Py_ssize_t *size, Py_ssize_t k, double v) {
    Py_ssize_t i;
    if (*size < k) {
        i = (*size)++;
        while (i > 0) {
            Py_ssize_t up = (i - 1) / 2;
            if (heap[up] <= v) break;
            heap[i] = heap[up];
            i = up;
        }
        heap[i] = v;
        return;
    }
    if (v <= heap[0]) return;
    i = 0;
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= k) break;
        if (c + 1 < k && heap[c + 1] < heap[c]) c++;
        if (heap[c] >= v) break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = v;
}

/* The first position in `v` (ascending, `len` long) holding at least `x`. */
static Py_ssize_t lower_bound(const int32_t *v, Py_ssize_t len, Py_ssize_t x) {
    Py_ssize_t lo = 0, hi = len;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A term of the query: its postings and what it adds at most. */
typedef struct {
    Buf docs; /* int32 document numbers, ascending (not held: a dense term) */
    Buf tf;   /* a tf byte per posting, or per document number when dense */
    double idf;
    double top; /* the largest tf part of its postings */
} Term;

/* What a document's score reaches at least among `hit[0..m)` (its partial sums times
   its factor): max(best × floor, tiny) and, with `pool` of them or more, the pool-th
   best. `heap` holds `pool` doubles. */
static double lower_mark(const double *a, const double *fv, const int32_t *hit, Py_ssize_t m,
                         double floor_share, double tiny, Py_ssize_t pool, double *heap) {
    double best = 0.0;
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        double s = fv ? a[hit[i]] * fv[hit[i]] : a[hit[i]];
        if (s > best) best = s;
        heap_push(heap, &size, pool, s);
    }
    double mark = best * floor_share;
    if (mark < tiny) mark = tiny;
    if (size == pool && heap[0] > mark) mark = heap[0];
    return mark;
}

/* The first position from `from` in `v` (ascending, `len` long) holding at least `x`:
   steps doubling forward, then a binary search between the last two. */
static inline Py_ssize_t gallop(const int32_t *v, Py_ssize_t len, Py_ssize_t from,
                                Py_ssize_t x) {
    Py_ssize_t lo = from, hi = from, step = 1;
    while (hi < len && v[hi] < x) {
        lo = hi + 1;
        hi += step;
        step <<= 1;
    }
    if (hi > len) hi = len;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* score_top(terms, n, table, lengths, avg_q, escapes_ok, factor, top_factor, floor,
             pool, tiny, acc, touched, vals)

   terms: a list of (docs or None, tf bytes, idf, top) in the query's canonical order
   (rarest first): the int32 documents (ascending) and tf bytes of a sparse term, or
   None and one tf byte per document number of a dense one; `top` its largest tf part.
   table: float32 tf parts of tf 0..7 per document; lengths: int64 per document (for
   the tfs the table lacks). factor: float64 per document, or None (1 everywhere);
   top_factor its maximum.

   A document's score is Σ idf × tf part over the terms it holds, added in the terms'
   order from 0, times its factor (`RelevanceIndex.scores`). Returns the documents
   scoring at least max(best × floor, tiny) and, when there are more than `pool`, only
   those at least the pool-th best score (ties included), as (docs, scores, best); or
   None when a tf is escaped and `escapes_ok` is false (the caller's NumPy path looks it
   up).

   Max-score, as `engine.relevance.maxscore` does it: terms are scored in full, rarest
   first, while a document holding none of them could still reach the mark the
   documents found so far set; the other terms are then looked up for the documents
   found only, each dropped once its partial score plus what the terms left add at most
   cannot reach the mark. Every document kept carries its exact score, so the result
   is the exhaustive one. */
static PyObject *score_top(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *terms, *table_o, *lengths_o, *factor_o, *acc_o, *touched_o, *vals_o;
    Py_ssize_t n, pool;
    double avg_q, top_factor, floor_share, tiny;
    int escapes_ok;
    if (!PyArg_ParseTuple(args, "O!nOOdpOddndOOO", &PyList_Type, &terms, &n, &table_o,
                          &lengths_o, &avg_q, &escapes_ok, &factor_o, &top_factor,
                          &floor_share, &pool, &tiny, &acc_o, &touched_o, &vals_o))
        return NULL;
    Buf table = {0}, lengths = {0}, factor = {0}, acc = {0}, touched = {0}, vals = {0};
    Term *qt = NULL;
    double *rest = NULL, *heap = NULL;
    Py_ssize_t n_terms = PyList_GET_SIZE(terms), held_terms = 0;
    PyObject *result = NULL;
    Py_ssize_t m = 0; /* documents found, each once, in `touched` */
    int n_ok = 0;     /* the scratch buffers hold `n` documents */
    int escaped = 0;
    if (get_buf(table_o, &table, sizeof(float), "table") < 0 ||
        get_buf(lengths_o, &lengths, sizeof(int64_t), "lengths") < 0 ||
        get_buf(acc_o, &acc, sizeof(double), "acc") < 0 ||
        get_buf(touched_o, &touched, sizeof(int32_t), "touched") < 0 ||
        get_buf(vals_o, &vals, sizeof(double), "vals") < 0)
        goto done;
    if (factor_o != Py_None && get_buf(factor_o, &factor, sizeof(double), "factor") < 0)
        goto done;
    if (n < 0 || pool < 1 || acc.view.len / (Py_ssize_t)sizeof(double) < n ||
        touched.view.len / (Py_ssize_t)sizeof(int32_t) < n ||
        vals.view.len / (Py_ssize_t)sizeof(double) < n ||
        table.view.len / (Py_ssize_t)sizeof(float) / TABLED < n ||
        lengths.view.len / (Py_ssize_t)sizeof(int64_t) < n ||
        (factor.held && factor.view.len / (Py_ssize_t)sizeof(double) < n)) {
        PyErr_SetString(PyExc_ValueError, "an array shorter than the documents");
        goto done;
    }
    n_ok = 1;
    qt = PyMem_Calloc((size_t)n_terms + 1, sizeof(Term));
    rest = PyMem_Calloc((size_t)n_terms + 1, sizeof(double));
    heap = PyMem_Malloc(sizeof(double) * (size_t)pool);
    if (!qt || !rest || !heap) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t t = 0; t < n_terms; t++) {
        PyObject *item = PyList_GET_ITEM(terms, t);
        PyObject *docs_o, *tf_o;
        Term *q = &qt[t];
        if (!PyTuple_Check(item) ||
            !PyArg_ParseTuple(item, "OOdd", &docs_o, &tf_o, &q->idf, &q->top)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "a term is (docs, tf bytes, idf, top)");
            goto done;
        }
        held_terms = t + 1;
        if ((docs_o != Py_None && get_buf(docs_o, &q->docs, sizeof(int32_t), "docs") < 0) ||
            get_buf(tf_o, &q->tf, 1, "tf") < 0)
            goto done;
        if (q->docs.held && q->docs.view.len / (Py_ssize_t)sizeof(int32_t) != q->tf.view.len) {
            PyErr_SetString(PyExc_ValueError, "a term's documents and tfs differ in length");
            goto done;
        }
    }
    for (Py_ssize_t t = n_terms - 1; t >= 0; t--) rest[t] = rest[t + 1] + qt[t].idf * qt[t].top;

    const float *tab = (const float *)table.view.buf;
    const int64_t *lens = (const int64_t *)lengths.view.buf;
    const double *fv = factor.held ? (const double *)factor.view.buf : NULL;
    double *a = (double *)acc.view.buf;
    int32_t *hit = (int32_t *)touched.view.buf;
    double *val = (double *)vals.view.buf;
    double mark = tiny;

    /* terms in full while a document none of them holds could still reach the mark */
    Py_ssize_t j = 0;
    for (; j < n_terms; j++) {
        if (j && top_factor * rest[j] * SUM_SLACK < (mark = lower_mark(a, fv, hit, m, floor_share,
                                                                     tiny, pool, heap)))
            break;
        const Term *q = &qt[j];
        const uint8_t *tf = (const uint8_t *)q->tf.view.buf;
        const int32_t *dv = q->docs.held ? (const int32_t *)q->docs.view.buf : NULL;
        Py_ssize_t count = q->tf.view.len;
        if (!dv && count > n) count = n;
        for (Py_ssize_t i = 0; i < count; i++) {
            unsigned int f = tf[i];
            if (!dv && !f) continue;
            Py_ssize_t d = dv ? (Py_ssize_t)dv[i] : i;
            if (d < 0 || d >= n) {
                PyErr_SetString(PyExc_ValueError, "a posting outside the documents");
                goto done;
            }
            double part;
            if (f < TABLED) {
                part = (double)tab[d * TABLED + f];
            } else if (f == TF_ESCAPE && !escapes_ok) {
                escaped = 1;
                goto done;
            } else {
                part = (double)tf_part((double)f, (double)lens[d], avg_q);
            }
            if (a[d] == 0.0) {
                if (m >= n || part <= 0.0) { /* only a weight of 0 brings one twice */
                    PyErr_SetString(PyExc_ValueError, "a tf part that is not positive");
                    goto done;
                }
                hit[m++] = (int32_t)d;
            }
            a[d] += part * q->idf;
        }
    }
    /* the other terms, for the documents found, dropping those that cannot make it:
       the documents in ascending order, so that a sparse term's postings are searched
       forward from the last one found */
    if (j < n_terms) {
        Py_ssize_t kept = 0;
        for (Py_ssize_t k = 0; k < m; k++) {
            Py_ssize_t d = hit[k];
            if ((a[d] + rest[j]) * (fv ? fv[d] : 1.0) * SUM_SLACK < mark)
                a[d] = 0.0;
            else
                hit[kept++] = (int32_t)d;
        }
        m = kept;
        /* in order: a bit per document (in the `vals` scratch, unused until the end),
           read back word by word */
        uint64_t *bits = (uint64_t *)val;
        Py_ssize_t words = (n + 63) / 64;
        memset(bits, 0, sizeof(uint64_t) * (size_t)words);
        for (Py_ssize_t k = 0; k < m; k++) bits[hit[k] >> 6] |= (uint64_t)1 << (hit[k] & 63);
        kept = 0;
        for (Py_ssize_t w = 0; w < words; w++) {
            uint64_t word = bits[w];
            while (word) {
                hit[kept++] = (int32_t)(w * 64 + __builtin_ctzll(word));
                word &= word - 1;
            }
        }
    }
    for (Py_ssize_t i = j; i < n_terms; i++) {
        const Term *q = &qt[i];
        const uint8_t *tf = (const uint8_t *)q->tf.view.buf;
        const int32_t *dv = q->docs.held ? (const int32_t *)q->docs.view.buf : NULL;
        const Py_ssize_t len = q->tf.view.len;
        Py_ssize_t at = 0, kept = 0;
        for (Py_ssize_t k = 0; k < m; k++) {
            Py_ssize_t d = hit[k];
            if ((a[d] + rest[i]) * (fv ? fv[d] : 1.0) * SUM_SLACK < mark) {
                a[d] = 0.0;
                continue;
            }
            hit[kept++] = (int32_t)d;
            unsigned int f;
            if (!dv) {
                if (d >= len) continue;
                f = tf[d];
            } else {
                at = gallop(dv, len, at, d);
                if (at == len) continue;
                if (dv[at] != d) continue;
                f = tf[at];
            }
            if (!f) continue;
            double part;
            if (f < TABLED) {
                part = (double)tab[d * TABLED + f];
            } else if (f == TF_ESCAPE && !escapes_ok) {
                /* every document found is still among hit[0..m) */
                escaped = 1;
                goto done;
            } else {
                part = (double)tf_part((double)f, (double)lens[d], avg_q);
            }
            a[d] += part * q->idf;
        }
        m = kept;
        if (i + 1 < n_terms && m > 4 * pool)
            mark = lower_mark(a, fv, hit, m, floor_share, tiny, pool, heap);
    }
    /* the scores and the best; the accumulator back to zeros */
    double best = 0.0;
    for (Py_ssize_t i = 0; i < m; i++) {
        double sc = fv ? a[hit[i]] * fv[hit[i]] : a[hit[i]];
        a[hit[i]] = 0.0;
        val[i] = sc;
        if (sc > best) best = sc;
    }
    Py_ssize_t found = m;
    m = 0; /* cleared */
    double cut = best * floor_share;
    if (cut < tiny) cut = tiny;
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < found; i++) {
        if (val[i] >= cut) {
            hit[kept] = hit[i];
            val[kept] = val[i];
            kept++;
        }
    }
    if (kept > pool) {
        Py_ssize_t size = 0;
        for (Py_ssize_t i = 0; i < kept; i++) heap_push(heap, &size, pool, val[i]);
        double kth = heap[0];
        Py_ssize_t w = 0;
        for (Py_ssize_t i = 0; i < kept; i++) {
            if (val[i] >= kth) {
                hit[w] = hit[i];
                val[w] = val[i];
                w++;
            }
        }
        kept = w;
    }
    if (best <= 0.0) kept = 0;
    PyObject *out_docs = PyList_New(kept), *out_scores = PyList_New(kept);
    if (!out_docs || !out_scores) {
        Py_XDECREF(out_docs);
        Py_XDECREF(out_scores);
        goto done;
    }
    for (Py_ssize_t i = 0; i < kept; i++) {
        PyObject *d = PyLong_FromLong(hit[i]), *sc = PyFloat_FromDouble(val[i]);
        if (!d || !sc) {
            Py_XDECREF(d);
            Py_XDECREF(sc);
            Py_DECREF(out_docs);
            Py_DECREF(out_scores);
            goto done;
        }
        PyList_SET_ITEM(out_docs, i, d);
        PyList_SET_ITEM(out_scores, i, sc);
    }
    result = Py_BuildValue("(NNd)", out_docs, out_scores, best);

done:
    if (escaped && !PyErr_Occurred()) {
        result = Py_None;
        Py_INCREF(result);
    }
    if (n_ok) { /* leave the accumulator as it was found: zeros */
        double *a0 = (double *)acc.view.buf;
        const int32_t *h0 = (const int32_t *)touched.view.buf;
        for (Py_ssize_t i = 0; i < m; i++) a0[h0[i]] = 0.0;
    }
    PyMem_Free(heap);
    PyMem_Free(rest);
    if (qt) {
        for (Py_ssize_t t = 0; t < held_terms; t++) {
            drop_buf(&qt[t].docs);
            drop_buf(&qt[t].tf);
        }
        PyMem_Free(qt);
    }
    drop_buf(&table);
    drop_buf(&lengths);
    drop_buf(&factor);
    drop_buf(&acc);
    drop_buf(&touched);
    drop_buf(&vals);
    return result;
}
/* passage_best(docs, q, idf, slot, e_start, e_end, first, stop, tid, x_at, x_tf,
                pstart, plen, ask, avg_q)

   `PassageStore.best`: per document of `docs`, the best score of its passages that do
   not ask, a passage's score being Σ idf × tf part over its entries whose term is one
   of `q` (ascending term ids; `idf` theirs), added in stored order from 0; 0 for a
   document without such a passage. `tid` holds 2- or 4-byte term ids. */
static PyObject *passage_best(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *docs, *q, *idf_o;
    PyObject *objs[11];
    double avg_q;
    if (!PyArg_ParseTuple(args, "O!O!O!OOOOOOOOOOOd", &PyList_Type, &docs, &PyList_Type, &q,
                          &PyList_Type, &idf_o, &objs[0], &objs[1], &objs[2], &objs[3],
                          &objs[4], &objs[5], &objs[6], &objs[7], &objs[8], &objs[9],
                          &objs[10], &avg_q))
        return NULL;
    enum { SLOT, E_START, E_END, FIRST, STOP, TID, X_AT, X_TF, PSTART, PLEN, ASK };
    static const Py_ssize_t sizes[11] = {4, 4, 4, 4, 4, 0, 4, 4, 4, 4, 1};
    static const char *names[11] = {"slot", "e_start", "e_end", "first", "stop", "tid",
                                    "x_at", "x_tf", "pstart", "plen", "ask"};
    Buf bufs[11];
    memset(bufs, 0, sizeof bufs);
    PyObject *result = NULL;
    int32_t *qv = NULL;
    double *iv = NULL;
    /* a bit per term id modulo 4096: most entries hold none of the query's terms, and
       one look at this rules them out before a search of `q` */
    uint64_t filter[64] = {0};
    Py_ssize_t nq = PyList_GET_SIZE(q), nd = PyList_GET_SIZE(docs);
    for (int i = 0; i < 11; i++)
        if (get_buf(objs[i], &bufs[i], sizes[i], names[i]) < 0) goto done;
    if (PyList_GET_SIZE(idf_o) != nq) {
        PyErr_SetString(PyExc_ValueError, "q and idf differ in length");
        goto done;
    }
    Py_ssize_t tid_size = bufs[TID].view.itemsize;
    if ((tid_size != 2 && tid_size != 4) || bufs[TID].view.len % tid_size) {
        PyErr_SetString(PyExc_ValueError, "term ids are 2 or 4 bytes");
        goto done;
    }
#define LEN(k) (bufs[k].view.len / (sizes[k] ? sizes[k] : 1))
#define I32(k) ((const int32_t *)bufs[k].view.buf)
    const Py_ssize_t n_slot = LEN(SLOT), n_runs = LEN(E_START);
    const Py_ssize_t n_entries = bufs[TID].view.len / tid_size, n_x = LEN(X_AT);
    const Py_ssize_t n_passages = LEN(PSTART);
    if (LEN(E_END) != n_runs || LEN(FIRST) != n_runs || LEN(STOP) != n_runs ||
        LEN(X_TF) != n_x || LEN(PLEN) != n_passages || LEN(ASK) != n_passages) {
        PyErr_SetString(PyExc_ValueError, "passage arrays do not fit together");
        goto done;
    }
    const int32_t *slot = I32(SLOT), *e_start = I32(E_START), *e_end = I32(E_END);
    const int32_t *first = I32(FIRST), *stop = I32(STOP), *x_at = I32(X_AT);
    const int32_t *x_tf = I32(X_TF), *pstart = I32(PSTART), *plen = I32(PLEN);
    const uint8_t *ask = (const uint8_t *)bufs[ASK].view.buf;
    const uint16_t *tid16 = (const uint16_t *)bufs[TID].view.buf;
    const int32_t *tid32 = (const int32_t *)bufs[TID].view.buf;
#undef LEN
#undef I32
    qv = PyMem_Malloc(sizeof(int32_t) * (size_t)(nq ? nq : 1));
    iv = PyMem_Malloc(sizeof(double) * (size_t)(nq ? nq : 1));
    if (!qv || !iv) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nq; i++) {
        long t = PyLong_AsLong(PyList_GET_ITEM(q, i));
        double w = PyFloat_AsDouble(PyList_GET_ITEM(idf_o, i));
        if (PyErr_Occurred()) goto done;
        if (t < 0 || t > INT32_MAX || (i && t <= qv[i - 1])) {
            PyErr_SetString(PyExc_ValueError, "q is not ascending term ids");
            goto done;
        }
        qv[i] = (int32_t)t;
        iv[i] = w;
        filter[(t >> 6) & 63] |= (uint64_t)1 << (t & 63);
    }
    result = PyList_New(nd);
    if (!result) goto done;
    for (Py_ssize_t k = 0; k < nd; k++) {
        Py_ssize_t doc = PyLong_AsSsize_t(PyList_GET_ITEM(docs, k));
        if (doc == -1 && PyErr_Occurred()) goto fail;
        double top = 0.0;
        int32_t s = (doc >= 0 && doc < n_slot) ? slot[doc] : -1;
        if (s >= 0 && nq) {
            if (s >= n_runs) goto bad;
            Py_ssize_t a = e_start[s], b = e_end[s], p0 = first[s], p1 = stop[s];
            if (a < 0 || b < a || b > n_entries || p0 < 0 || p1 < p0 || p1 > n_passages)
                goto bad;
            Py_ssize_t x = lower_bound(x_at, n_x, a);
            for (Py_ssize_t p = p0; p < p1; p++) {
                Py_ssize_t from = pstart[p], to = p + 1 < p1 ? pstart[p + 1] : b;
                if (from < a || to < from || to > b) goto bad;
                if (ask[p]) continue;
                double sum = 0.0;
                int any = 0;
                double len = (double)plen[p];
                for (Py_ssize_t e = from; e < to; e++) {
                    int32_t t = tid_size == 2 ? (int32_t)tid16[e] : tid32[e];
                    if (!((filter[(t >> 6) & 63] >> (t & 63)) & 1)) continue;
                    Py_ssize_t lo = 0, hi = nq;
                    while (lo < hi) {
                        Py_ssize_t mid = lo + (hi - lo) / 2;
                        if (qv[mid] < t)
                            lo = mid + 1;
                        else
                            hi = mid;
                    }
                    if (lo == nq || qv[lo] != t) continue;
                    while (x < n_x && x_at[x] < e) x++;
                    double tf = (x < n_x && x_at[x] == e) ? (double)x_tf[x] : 1.0;
                    sum += (double)tf_part(tf, len, avg_q) * iv[lo];
                    any = 1;
                }
                if (any && sum > top) top = sum;
            }
        }
        PyObject *v = PyFloat_FromDouble(top);
        if (!v) goto fail;
        PyList_SET_ITEM(result, k, v);
    }
    goto done;
bad:
    PyErr_SetString(PyExc_ValueError, "passage arrays out of range");
fail:
    Py_CLEAR(result);
done:
    PyMem_Free(qv);
    PyMem_Free(iv);
    for (int i = 0; i < 11; i++) drop_buf(&bufs[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"score_top", score_top, METH_VARARGS, "The best documents for a query, with their exact BM25F scores."},
    {"passage_best", passage_best, METH_VARARGS, "Each folder's best passage score."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "Compiled inner loops of the ranked recall.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
