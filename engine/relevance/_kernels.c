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
#define AHEAD 8 /* how far ahead a loop asks the memory for what it will read */
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

/* `lower_bound`, for values spread about evenly (the entries whose tf is not 1 are
   spread over the whole store): a few guesses by interpolation narrow the range, then a
   binary search ends it. Every probe stays inside [lo, hi), so it is exact whatever the
   spread; evenly spread, it reads a few places where a binary search reads twenty, each
   a cache miss on a cold store. */
static Py_ssize_t probe(const int32_t *v, Py_ssize_t len, Py_ssize_t x) {
    Py_ssize_t lo = 0, hi = len; /* v[i] < x for i < lo, v[i] >= x for i >= hi */
    for (int round = 0; round < 3 && hi - lo > 32; round++) {
        double low = v[lo], high = v[hi - 1];
        if (low >= (double)x) return lo;
        if (high < (double)x) return hi;
        double share = ((double)x - low) / (high - low);
        Py_ssize_t g = lo + (Py_ssize_t)((double)(hi - 1 - lo) * share);
        if (g < lo) g = lo;
        if (g > hi - 1) g = hi - 1;
        Py_ssize_t step = 8;
        if (v[g] < x) { /* the answer is right of g: step right until past it */
            lo = g + 1;
            while (g + step < hi) {
                if (v[g + step] >= x) {
                    hi = g + step;
                    break;
                }
                lo = g + step + 1;
                step <<= 1;
            }
        } else { /* the answer is at g or left of it: step left until before it */
            hi = g;
            while (g - step >= lo) {
                if (v[g - step] < x) {
                    lo = g - step + 1;
                    break;
                }
                hi = g - step;
                step <<= 1;
            }
        }
    }
    return lo + lower_bound(v + lo, hi - lo, x);
}

/* A passage store's arrays (engine.relevance.passages.PassageStore), checked to fit
   together: per slot its run of entries and of passages, per entry its term id (2 or 4
   bytes), the entries whose tf is not 1 (ascending) and their tfs, per passage its
   first entry, length and whether it asks. */
enum { SLOT, E_START, E_END, FIRST, STOP, TID, X_AT, X_TF, PSTART, PLEN, ASK, N_ARRAYS };

typedef struct {
    Buf bufs[N_ARRAYS];
    const int32_t *slot, *e_start, *e_end, *first, *stop, *x_at, *x_tf, *pstart, *plen;
    const uint8_t *ask;
    const uint16_t *tid16;
    const int32_t *tid32;
    Py_ssize_t tid_size, n_slot, n_runs, n_entries, n_x, n_passages;
    double avg_q;
} Passages;

static void passages_close(Passages *p) {
    for (int i = 0; i < N_ARRAYS; i++) drop_buf(&p->bufs[i]);
}

/* Opens `arrays`, a tuple of the arrays (in the enum's order) and the average passage
   length (`PassageStore.query_arrays`); -1 with an error set when they do not fit
   together (the caller closes either way). */
static int passages_open(Passages *p, PyObject *arrays) {
    static const Py_ssize_t sizes[N_ARRAYS] = {4, 4, 4, 4, 4, 0, 4, 4, 4, 4, 1};
    static const char *names[N_ARRAYS] = {"slot", "e_start", "e_end", "first", "stop", "tid",
                                          "x_at", "x_tf", "pstart", "plen", "ask"};
    memset(p, 0, sizeof *p);
    if (!PyTuple_Check(arrays) || PyTuple_GET_SIZE(arrays) != N_ARRAYS + 1) {
        PyErr_SetString(PyExc_ValueError, "passages: 11 arrays and the average length");
        return -1;
    }
    p->avg_q = PyFloat_AsDouble(PyTuple_GET_ITEM(arrays, N_ARRAYS));
    if (p->avg_q == -1.0 && PyErr_Occurred()) return -1;
    for (int i = 0; i < N_ARRAYS; i++)
        if (get_buf(PyTuple_GET_ITEM(arrays, i), &p->bufs[i], sizes[i], names[i]) < 0)
            return -1;
    p->tid_size = p->bufs[TID].view.itemsize;
    if ((p->tid_size != 2 && p->tid_size != 4) || p->bufs[TID].view.len % p->tid_size) {
        PyErr_SetString(PyExc_ValueError, "term ids are 2 or 4 bytes");
        return -1;
    }
#define LEN(k) (p->bufs[k].view.len / (sizes[k] ? sizes[k] : 1))
#define I32(k) ((const int32_t *)p->bufs[k].view.buf)
    p->n_slot = LEN(SLOT);
    p->n_runs = LEN(E_START);
    p->n_entries = p->bufs[TID].view.len / p->tid_size;
    p->n_x = LEN(X_AT);
    p->n_passages = LEN(PSTART);
    if (LEN(E_END) != p->n_runs || LEN(FIRST) != p->n_runs || LEN(STOP) != p->n_runs ||
        LEN(X_TF) != p->n_x || LEN(PLEN) != p->n_passages || LEN(ASK) != p->n_passages) {
        PyErr_SetString(PyExc_ValueError, "passage arrays do not fit together");
        return -1;
    }
    p->slot = I32(SLOT);
    p->e_start = I32(E_START);
    p->e_end = I32(E_END);
    p->first = I32(FIRST);
    p->stop = I32(STOP);
    p->x_at = I32(X_AT);
    p->x_tf = I32(X_TF);
    p->pstart = I32(PSTART);
    p->plen = I32(PLEN);
#undef LEN
#undef I32
    p->ask = (const uint8_t *)p->bufs[ASK].view.buf;
    p->tid16 = (const uint16_t *)p->bufs[TID].view.buf;
    p->tid32 = (const int32_t *)p->bufs[TID].view.buf;
    return 0;
}

/* A query's term ids (ascending, distinct) and their idfs over the passages, with a bit
   per term id modulo 4096: most entries hold none of the query's terms, and one look
   at the bits rules them out before a search of the ids. */
typedef struct {
    int32_t *ids;
    double *idf;
    Py_ssize_t n;
    uint64_t filter[64];
} PQuery;

static void pquery_close(PQuery *q) {
    PyMem_Free(q->ids);
    PyMem_Free(q->idf);
}

static int pquery_open(PQuery *q, PyObject *ids, PyObject *idf) {
    memset(q, 0, sizeof *q);
    if (!PyList_Check(ids) || !PyList_Check(idf) || PyList_GET_SIZE(ids) != PyList_GET_SIZE(idf)) {
        PyErr_SetString(PyExc_ValueError, "q and idf are lists of one length");
        return -1;
    }
    q->n = PyList_GET_SIZE(ids);
    q->ids = PyMem_Malloc(sizeof(int32_t) * (size_t)(q->n ? q->n : 1));
    q->idf = PyMem_Malloc(sizeof(double) * (size_t)(q->n ? q->n : 1));
    if (!q->ids || !q->idf) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < q->n; i++) {
        long t = PyLong_AsLong(PyList_GET_ITEM(ids, i));
        double w = PyFloat_AsDouble(PyList_GET_ITEM(idf, i));
        if (PyErr_Occurred()) return -1;
        if (t < 0 || t > INT32_MAX || (i && t <= q->ids[i - 1])) {
            PyErr_SetString(PyExc_ValueError, "q is not ascending term ids");
            return -1;
        }
        q->ids[i] = (int32_t)t;
        q->idf[i] = w;
        q->filter[(t >> 6) & 63] |= (uint64_t)1 << (t & 63);
    }
    return 0;
}

/* `PassageStore.best`: per document of `docs`, the best score of its passages that do
   not ask, a passage's score being Σ idf × tf part over its entries whose term is one
   of the query's, added in stored order from 0; 0 for a document without such a
   passage; times the document's factor when `fv` is given (`n_factor` long). Into
   `out`; -1 with an error set for damaged arrays. `slots` is scratch for nd. */
static int passages_best(const Passages *p, const PQuery *q, const Py_ssize_t *docs,
                         Py_ssize_t nd, const double *fv, Py_ssize_t n_factor, int32_t *slots,
                         double *out) {
    const int32_t *slot = p->slot, *e_start = p->e_start, *e_end = p->e_end;
    const int32_t *first = p->first, *stop = p->stop, *x_at = p->x_at, *x_tf = p->x_tf;
    const int32_t *pstart = p->pstart, *plen = p->plen;
    const Py_ssize_t n_x = p->n_x;
    /* what each folder's passages need, asked of the memory for every folder before the
       first is read: a store that is not in the caches costs one wait, not one a read */
    for (Py_ssize_t k = 0; k < nd; k++) {
        Py_ssize_t doc = docs[k];
        if (fv && (doc < 0 || doc >= n_factor)) {
            PyErr_SetString(PyExc_ValueError, "a folder without a factor");
            return -1;
        }
        if (doc >= 0 && doc < p->n_slot) __builtin_prefetch(&slot[doc]);
    }
    for (Py_ssize_t k = 0; k < nd; k++) {
        Py_ssize_t doc = docs[k];
        int32_t s = doc >= 0 && doc < p->n_slot ? slot[doc] : -1;
        slots[k] = s;
        if (s >= 0 && s < p->n_runs) {
            __builtin_prefetch(&e_start[s]);
            __builtin_prefetch(&e_end[s]);
            __builtin_prefetch(&first[s]);
            __builtin_prefetch(&stop[s]);
        }
    }
    for (Py_ssize_t k = 0; k < nd; k++) {
        int32_t s = slots[k];
        if (s < 0 || s >= p->n_runs) continue;
        Py_ssize_t a = e_start[s], b = e_end[s], p0 = first[s];
        if (a < 0 || b < a || b > p->n_entries || p0 < 0 || p0 >= p->n_passages) continue;
        const char *run = p->tid_size == 2 ? (const char *)(p->tid16 + a)
                                           : (const char *)(p->tid32 + a);
        for (Py_ssize_t at = 0; at < (b - a) * p->tid_size; at += 64) __builtin_prefetch(run + at);
        __builtin_prefetch(&pstart[p0]);
        __builtin_prefetch(&plen[p0]);
        __builtin_prefetch(&p->ask[p0]);
        if (n_x > 32 && x_at[n_x - 1] > x_at[0]) { /* where `probe` will look first */
            double share = (double)(a - x_at[0]) / (double)(x_at[n_x - 1] - x_at[0]);
            double g = (double)(n_x - 1) * share;
            if (g >= 0 && g < (double)n_x) __builtin_prefetch(&x_at[(Py_ssize_t)g]);
        }
    }
    for (Py_ssize_t k = 0; k < nd; k++) {
        double top = 0.0;
        int32_t s = slots[k];
        if (s >= 0 && q->n) {
            if (s >= p->n_runs) goto bad;
            Py_ssize_t a = e_start[s], b = e_end[s], p0 = first[s], p1 = stop[s];
            if (a < 0 || b < a || b > p->n_entries || p0 < 0 || p1 < p0 || p1 > p->n_passages)
                goto bad;
            Py_ssize_t x = probe(x_at, n_x, a);
            for (Py_ssize_t ps = p0; ps < p1; ps++) {
                Py_ssize_t from = pstart[ps], to = ps + 1 < p1 ? pstart[ps + 1] : b;
                if (from < a || to < from || to > b) goto bad;
                if (p->ask[ps]) continue;
                double sum = 0.0;
                int any = 0;
                double len = (double)plen[ps];
                for (Py_ssize_t e = from; e < to; e++) {
                    int32_t t = p->tid_size == 2 ? (int32_t)p->tid16[e] : p->tid32[e];
                    if (!((q->filter[(t >> 6) & 63] >> (t & 63)) & 1)) continue;
                    Py_ssize_t lo = lower_bound(q->ids, q->n, t);
                    if (lo == q->n || q->ids[lo] != t) continue;
                    while (x < n_x && x_at[x] < e) x++;
                    double tf = (x < n_x && x_at[x] == e) ? (double)x_tf[x] : 1.0;
                    sum += (double)tf_part(tf, len, p->avg_q) * q->idf[lo];
                    any = 1;
                }
                if (any && sum > top) top = sum;
            }
        }
        out[k] = fv ? top * fv[docs[k]] : top;
    }
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "passage arrays out of range");
    return -1;
}

/* The tf part of a posting of tf byte `f` (not 0) in document d: from the document's
   table row below `TABLED`, computed above it; -1 for an escaped tf (255, the real one
   kept apart) unless `escapes_ok` (none is kept apart: 255 is the tf). */
static inline double posting_part(unsigned int f, Py_ssize_t d, const float *tab,
                                  const int64_t *lens, double avg_q, int escapes_ok) {
    if (f < TABLED) return (double)tab[d * TABLED + f];
    if (f == TF_ESCAPE && !escapes_ok) return -1.0;
    return (double)tf_part((double)f, (double)lens[d], avg_q);
}

/* Keeps, in place and in order, the documents of `hit[0..count)` whose `val` is at
   least `mark`; how many. */
static Py_ssize_t keep_from(int32_t *hit, double *val, Py_ssize_t count, double mark) {
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (val[i] >= mark) {
            hit[kept] = hit[i];
            val[kept] = val[i];
            kept++;
        }
    }
    return kept;
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
    return lo + lower_bound(v + lo, hi - lo, x);
}

/* Whether folder i goes before folder j: the higher score first, ties by folder id
   (`ids`, a list of str), so the order never depends on document numbers. -1: the ids
   could not be compared (an error is set). */
static int before(const double *score, const int32_t *doc, Py_ssize_t i, Py_ssize_t j,
                  PyObject *ids) {
    if (score[i] != score[j]) return score[i] > score[j];
    PyObject *a = PyList_GET_ITEM(ids, doc[i]), *b = PyList_GET_ITEM(ids, doc[j]);
    if (!PyUnicode_Check(a) || !PyUnicode_Check(b)) {
        PyErr_SetString(PyExc_TypeError, "folder ids are str");
        return -1;
    }
    int c = PyUnicode_Compare(a, b);
    if (c == -1 && PyErr_Occurred()) return -1;
    return c < 0;
}

/* `order[0..k)` sorted by `before` (a merge sort, stable; `tmp` k long); -1 on error. */
static int sort_order(Py_ssize_t *order, Py_ssize_t *tmp, Py_ssize_t k, const double *score,
                      const int32_t *doc, PyObject *ids) {
    for (Py_ssize_t width = 1; width < k; width *= 2) {
        for (Py_ssize_t lo = 0; lo < k; lo += 2 * width) {
            Py_ssize_t mid = lo + width < k ? lo + width : k;
            Py_ssize_t hi = lo + 2 * width < k ? lo + 2 * width : k;
            Py_ssize_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                int b = before(score, doc, order[j], order[i], ids);
                if (b < 0) return -1;
                tmp[o++] = b ? order[j++] : order[i++];
            }
            while (i < mid) tmp[o++] = order[i++];
            while (j < hi) tmp[o++] = order[j++];
        }
        memcpy(order, tmp, sizeof(Py_ssize_t) * (size_t)k);
    }
    return 0;
}

/* The rest of `RelevanceIndex.rank` for the `kept` folders `doc` with their scores
   `val` (the best `best`): `finish` is (ids, passages, q, q_idf, passage_weight,
   min_relative, limit); `passages` the store's arrays and average passage length (None:
   it has no passage), for the ascending term ids `q` and their idfs. With a rerank
   (a passage_weight over 0) each
   folder scores `(1 − w) · F / best + w · P / max P`, P its best passage times its
   factor (`fv`, `n` long); then folders under max(min_relative × the best, tiny) and,
   of more than `limit`, under the limit-th best go. (ids, scores), best first, ties by
   folder id: tuples. The same double operations as the Python they replace. */
static PyObject *finish_rank(PyObject *finish, int32_t *doc, double *val, Py_ssize_t kept,
                             double best, const double *fv, Py_ssize_t n, double tiny) {
    PyObject *ids, *passages_o, *q_o, *q_idf_o;
    double weight, min_relative;
    Py_ssize_t limit;
    if (!PyTuple_Check(finish) ||
        !PyArg_ParseTuple(finish, "O!OOOddn", &PyList_Type, &ids, &passages_o, &q_o, &q_idf_o,
                          &weight, &min_relative, &limit))
        return NULL;
    PyObject *result = NULL;
    Passages ps;
    PQuery pq;
    memset(&ps, 0, sizeof ps);
    memset(&pq, 0, sizeof pq);
    Py_ssize_t *order = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(2 * kept + 1));
    Py_ssize_t *docs_p = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(kept + 1));
    double *score = PyMem_Malloc(sizeof(double) * (size_t)(2 * kept + 1));
    int32_t *slots = PyMem_Malloc(sizeof(int32_t) * (size_t)(kept + 1));
    if (!order || !docs_p || !score || !slots) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < kept; i++) {
        if (doc[i] >= PyList_GET_SIZE(ids)) {
            PyErr_SetString(PyExc_ValueError, "a folder without an id");
            goto done;
        }
        docs_p[i] = doc[i];
    }
    Py_ssize_t k = 0; /* folders kept, their places in `order` */
    if (weight > 0.0 && kept) {
        double *passage = score + kept;
        if (passages_o == Py_None) { /* a store without passages: none scores */
            memset(passage, 0, sizeof(double) * (size_t)kept);
        } else {
            if (passages_open(&ps, passages_o) < 0 || pquery_open(&pq, q_o, q_idf_o) < 0)
                goto done;
            if (passages_best(&ps, &pq, docs_p, kept, fv, fv ? n : 0, slots, passage) < 0)
                goto done;
        }
        double top = passage[0];
        for (Py_ssize_t i = 1; i < kept; i++)
            if (passage[i] > top) top = passage[i];
        double keep_w = 1.0 - weight, most = 0.0;
        for (Py_ssize_t i = 0; i < kept; i++) {
            score[i] = top > 0.0 ? (keep_w * val[i]) / best + (weight * passage[i]) / top
                                 : (keep_w * val[i]) / best;
            if (i == 0 || score[i] > most) most = score[i];
        }
        double cut = most * min_relative;
        if (cut < tiny) cut = tiny;
        if (kept > limit && limit > 0) {
            double *heap = passage; /* the passages' scores are used up */
            Py_ssize_t size = 0;
            for (Py_ssize_t i = 0; i < kept; i++) heap_push(heap, &size, limit, score[i]);
            if (heap[0] > cut) cut = heap[0];
        }
        for (Py_ssize_t i = 0; i < kept; i++)
            if (score[i] >= cut) order[k++] = i;
    } else {
        for (Py_ssize_t i = 0; i < kept; i++) {
            score[i] = val[i];
            order[k++] = i;
        }
    }
    if (sort_order(order, order + kept, k, score, doc, ids) < 0) goto done;
    PyObject *out_ids = PyTuple_New(k), *out_scores = PyTuple_New(k);
    if (!out_ids || !out_scores) {
        Py_XDECREF(out_ids);
        Py_XDECREF(out_scores);
        goto done;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *id = PyList_GET_ITEM(ids, doc[order[i]]);
        PyObject *sc = PyFloat_FromDouble(score[order[i]]);
        if (!sc) {
            Py_DECREF(out_ids);
            Py_DECREF(out_scores);
            goto done;
        }
        Py_INCREF(id);
        PyTuple_SET_ITEM(out_ids, i, id);
        PyTuple_SET_ITEM(out_scores, i, sc);
    }
    result = PyTuple_Pack(2, out_ids, out_scores);
    Py_DECREF(out_ids);
    Py_DECREF(out_scores);
done:
    PyMem_Free(order);
    PyMem_Free(docs_p);
    PyMem_Free(score);
    PyMem_Free(slots);
    pquery_close(&pq);
    passages_close(&ps);
    return result;
}

/* score_top(terms, n, table, lengths, avg_q, escapes_ok, factor, top_factor, floor,
             pool, tiny, acc, touched, vals, finish)

   terms: a list of (docs or None, tf bytes, idf, top) in the query's canonical order
   (rarest first): the int32 documents (ascending) and tf bytes of a sparse term, or
   None and one tf byte per document number of a dense one; `top` its largest tf part.
   table: float32 tf parts of tf 0..7 per document; lengths: int64 per document (for
   the tfs the table lacks). factor: float64 per document, or None (1 everywhere);
   top_factor its maximum.

   A document's score is Σ idf × tf part over the terms it holds, added in the terms'
   order from 0, times its factor (`RelevanceIndex.scores`). The documents scoring at
   least max(best × floor, tiny) and, when there are more than `pool`, only those at
   least the pool-th best score (ties included), go to `finish_rank` with `finish`,
   whose (ids, scores) are returned; or None when a tf is escaped and `escapes_ok` is
   false (the caller's NumPy path looks it up).

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
    PyObject *finish;
    if (!PyArg_ParseTuple(args, "O!nOOdpOddndOOOO", &PyList_Type, &terms, &n, &table_o,
                          &lengths_o, &avg_q, &escapes_ok, &factor_o, &top_factor,
                          &floor_share, &pool, &tiny, &acc_o, &touched_o, &vals_o, &finish))
        return NULL;
    Buf table = {0}, lengths = {0}, factor = {0}, acc = {0}, touched = {0}, vals = {0};
    Term *qt = NULL;
    double *rest = NULL, *heap = NULL;
    Py_ssize_t *at = NULL; /* per term: where its postings were last searched */
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
    at = PyMem_Calloc((size_t)n_terms + 1, sizeof(Py_ssize_t));
    if (!qt || !rest || !heap || !at) {
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
    double most = 0.0; /* the best partial score so far: the mark is at most that */
    for (; j < n_terms; j++) {
        if (j) {
            double could = top_factor * rest[j] * SUM_SLACK;
            if ((could < most || could < tiny) &&
                could < (mark = lower_mark(a, fv, hit, m, floor_share, tiny, pool, heap)))
                break;
        }
        const Term *q = &qt[j];
        const uint8_t *tf = (const uint8_t *)q->tf.view.buf;
        const int32_t *dv = q->docs.held ? (const int32_t *)q->docs.view.buf : NULL;
        Py_ssize_t count = q->tf.view.len;
        if (!dv && count > n) count = n;
        for (Py_ssize_t i = 0; i < count; i++) {
            if (dv && i + AHEAD < count) { /* a posting list is read in order: ask ahead */
                Py_ssize_t next = dv[i + AHEAD];
                if (next >= 0 && next < n) {
                    __builtin_prefetch(&tab[next * TABLED]);
                    __builtin_prefetch(&a[next]);
                    if (fv) __builtin_prefetch(&fv[next]);
                }
            }
            unsigned int f = tf[i];
            if (!dv && !f) continue;
            Py_ssize_t d = dv ? (Py_ssize_t)dv[i] : i;
            if (d < 0 || d >= n) {
                PyErr_SetString(PyExc_ValueError, "a posting outside the documents");
                goto done;
            }
            double part = posting_part(f, d, tab, lens, avg_q, escapes_ok);
            if (part < 0.0) {
                escaped = 1;
                goto done;
            }
            if (a[d] == 0.0) {
                if (m >= n || part <= 0.0) { /* only a weight of 0 brings one twice */
                    PyErr_SetString(PyExc_ValueError, "a tf part that is not positive");
                    goto done;
                }
                hit[m++] = (int32_t)d;
            }
            a[d] += part * q->idf;
            double v = fv ? a[d] * fv[d] : a[d];
            if (v > most) most = v;
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
    /* then folder by folder: each one's remaining terms added in order, unless what they
       add at most cannot lift it to the mark; the mark rises with the exact scores of
       the folders done (their pool-th best, floor × their best) */
    if (j < n_terms) {
        Py_ssize_t kept = 0, done_n = 0;
        double best_done = 0.0;
        for (Py_ssize_t i = j; i < n_terms; i++) at[i] = 0;
        for (Py_ssize_t k = 0; k < m; k++) {
            Py_ssize_t d = hit[k];
            if (k + AHEAD < m) { /* the folders are read in order: ask ahead */
                Py_ssize_t next = hit[k + AHEAD];
                __builtin_prefetch(&tab[next * TABLED]);
                for (Py_ssize_t i = j; i < n_terms; i++)
                    if (!qt[i].docs.held && next < qt[i].tf.view.len)
                        __builtin_prefetch((const uint8_t *)qt[i].tf.view.buf + next);
            }
            const double f = fv ? fv[d] : 1.0;
            double sum = a[d];
            Py_ssize_t i = j;
            for (; i < n_terms; i++) {
                if ((sum + rest[i]) * f * SUM_SLACK < mark) break;
                const Term *q = &qt[i];
                const uint8_t *tf = (const uint8_t *)q->tf.view.buf;
                const Py_ssize_t len = q->tf.view.len;
                unsigned int tfv;
                if (!q->docs.held) {
                    if (d >= len) continue;
                    tfv = tf[d];
                } else {
                    const int32_t *dv = (const int32_t *)q->docs.view.buf;
                    Py_ssize_t p = at[i] = gallop(dv, len, at[i], d);
                    if (p == len || dv[p] != d) continue;
                    tfv = tf[p];
                }
                if (!tfv) continue;
                double part = posting_part(tfv, d, tab, lens, avg_q, escapes_ok);
                if (part < 0.0) { /* every folder found is still among hit[0..m): cleared */
                    escaped = 1;
                    goto done;
                }
                sum += part * q->idf;
            }
            if (i < n_terms) { /* out of the race */
                a[d] = 0.0;
                continue;
            }
            a[d] = sum;
            hit[kept++] = (int32_t)d;
            double v = sum * f;
            if (v > best_done) best_done = v;
            heap_push(heap, &done_n, pool, v);
            double rise = best_done * floor_share;
            if (done_n == pool && heap[0] > rise) rise = heap[0];
            if (rise > mark) mark = rise;
        }
        m = kept;
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
    Py_ssize_t kept = keep_from(hit, val, found, cut);
    if (kept > pool) {
        Py_ssize_t size = 0;
        for (Py_ssize_t i = 0; i < kept; i++) heap_push(heap, &size, pool, val[i]);
        kept = keep_from(hit, val, kept, heap[0]);
    }
    if (best <= 0.0) kept = 0;
    result = finish_rank(finish, hit, val, kept, best, fv, n, tiny);

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
    PyMem_Free(at);
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
/* passage_best(docs, q, idf, passages, factor): `passages_best` of the documents
   `docs` (a list), for the ascending term ids `q` and their idfs; `passages` the
   store's 11 arrays and its average passage length (a tuple); `factor` float64 per
   document or None. A list of floats. */
static PyObject *passage_best(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *docs, *q, *idf_o, *passages_o, *factor_o;
    if (!PyArg_ParseTuple(args, "O!OOOO", &PyList_Type, &docs, &q, &idf_o, &passages_o,
                          &factor_o))
        return NULL;
    Passages ps;
    PQuery pq;
    Buf factor = {0};
    PyObject *result = NULL;
    Py_ssize_t nd = PyList_GET_SIZE(docs);
    Py_ssize_t *dv = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(nd ? nd : 1));
    int32_t *slots = PyMem_Malloc(sizeof(int32_t) * (size_t)(nd ? nd : 1));
    double *out = PyMem_Malloc(sizeof(double) * (size_t)(nd ? nd : 1));
    memset(&ps, 0, sizeof ps);
    memset(&pq, 0, sizeof pq);
    if (!dv || !slots || !out) {
        PyErr_NoMemory();
        goto done;
    }
    if (passages_open(&ps, passages_o) < 0 || pquery_open(&pq, q, idf_o) < 0) goto done;
    if (factor_o != Py_None && get_buf(factor_o, &factor, sizeof(double), "factor") < 0)
        goto done;
    for (Py_ssize_t k = 0; k < nd; k++) {
        dv[k] = PyLong_AsSsize_t(PyList_GET_ITEM(docs, k));
        if (dv[k] == -1 && PyErr_Occurred()) goto done;
    }
    if (passages_best(&ps, &pq, dv, nd, factor.held ? (const double *)factor.view.buf : NULL,
                      factor.held ? factor.view.len / (Py_ssize_t)sizeof(double) : 0, slots,
                      out) < 0)
        goto done;
    result = PyList_New(nd);
    if (!result) goto done;
    for (Py_ssize_t k = 0; k < nd; k++) {
        PyObject *v = PyFloat_FromDouble(out[k]);
        if (!v) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, k, v);
    }
done:
    PyMem_Free(dv);
    PyMem_Free(slots);
    PyMem_Free(out);
    pquery_close(&pq);
    passages_close(&ps);
    drop_buf(&factor);
    return result;
}

static PyMethodDef methods[] = {
    {"score_top", score_top, METH_VARARGS, "The best folders for a query, exactly scored."},
    {"passage_best", passage_best, METH_VARARGS, "Each folder's best passage score."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "Compiled inner loops of the ranked recall.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
