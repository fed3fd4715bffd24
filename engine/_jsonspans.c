/* Where a request's list lies in its JSON line (engine.json_spans says why).

`member_items(line, outer, inner)`: in the JSON text `line`, an object whose member
`outer` is an object whose member `inner` is an array, that array's bytes (its offsets:
from its `[` to just past its `]`) and, per item, the offset just past the item,
counted from the `[`. None whenever the answer would not be exact:

* the text is not an object at the top, or either member is missing, or not an object /
  an array;
* either key appears twice at its level (a parser keeps only one of them);
* any key at either level holds a backslash (an escaped key may spell `outer` or `inner`
  in other bytes);
* the text ends early or is not JSON where the scan has to look.

The scan trusts nothing about the bytes: every read is bounds-checked, so any input
returns None or offsets inside it, never reads outside it. On text a JSON parser
accepted, the offsets are exact: strings are skipped up to their first unescaped quote
(an even run of backslashes before it), containers by counting brackets outside strings,
other values up to the next delimiter or white space. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

typedef struct {
    const unsigned char *s;
    Py_ssize_t n;
} Text;

static inline int is_ws(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static inline Py_ssize_t skip_ws(const Text *t, Py_ssize_t p) {
    while (p < t->n && is_ws(t->s[p])) p++;
    return p;
}

/* p at an opening quote: the offset just past the closing one, or -1. *escaped (when
   given) is set when the string holds a backslash. */
static Py_ssize_t skip_string(const Text *t, Py_ssize_t p, int *escaped) {
    Py_ssize_t from = ++p;
    for (;;) {
        if (p >= t->n) return -1;
        const unsigned char *q = memchr(t->s + p, '"', (size_t)(t->n - p));
        if (q == NULL) return -1;
        Py_ssize_t at = q - t->s;
        Py_ssize_t back = at;
        while (back > from && t->s[back - 1] == '\\') back--;
        if ((at - back) % 2 == 0) { /* not escaped: the end */
            if (escaped != NULL && memchr(t->s + from, '\\', (size_t)(at - from)) != NULL)
                *escaped = 1;
            return at + 1;
        }
        p = at + 1;
    }
}

/* p at a value: the offset just past it, or -1. */
static Py_ssize_t skip_value(const Text *t, Py_ssize_t p) {
    if (p >= t->n) return -1;
    unsigned char c = t->s[p];
    if (c == '"') return skip_string(t, p, NULL);
    if (c == '{' || c == '[') {
        Py_ssize_t depth = 0;
        while (p < t->n) {
            c = t->s[p];
            if (c == '"') {
                p = skip_string(t, p, NULL);
                if (p < 0) return -1;
                continue;
            }
            if (c == '{' || c == '[') {
                depth++;
            } else if (c == '}' || c == ']') {
                if (--depth == 0) return p + 1;
            }
            p++;
        }
        return -1;
    }
    if (c == ',' || c == ':' || c == '}' || c == ']' || is_ws(c)) return -1;
    while (p < t->n) {
        c = t->s[p];
        if (c == ',' || c == ']' || c == '}' || c == ':' || c == '"' || is_ws(c)) return p;
        p++;
    }
    return p;
}

typedef struct {
    Py_ssize_t key, key_len; /* the member's key bytes (between the quotes) */
} Member;

/* *p just inside an object's `{` (`first`) or past a member's value: 1 with the next
   member's key in *m and *p at its value; 0 with *p past the `}` when the object ends;
   -1 when the text is not what an object holds there (or the key has a backslash). */
static int next_member(const Text *t, Py_ssize_t *p, int first, Member *m) {
    Py_ssize_t q = skip_ws(t, *p);
    if (q >= t->n) return -1;
    if (t->s[q] == '}') {
        *p = q + 1;
        return 0;
    }
    if (!first) {
        if (t->s[q] != ',') return -1;
        q = skip_ws(t, q + 1);
        if (q >= t->n) return -1;
    }
    if (t->s[q] != '"') return -1;
    int escaped = 0;
    Py_ssize_t end = skip_string(t, q, &escaped);
    if (end < 0 || escaped) return -1;
    m->key = q + 1;
    m->key_len = end - 1 - (q + 1);
    q = skip_ws(t, end);
    if (q >= t->n || t->s[q] != ':') return -1;
    q = skip_ws(t, q + 1);
    if (q >= t->n) return -1;
    *p = q;
    return 1;
}

static inline int key_is(const Text *t, const Member *m, const char *key, Py_ssize_t len) {
    return m->key_len == len && memcmp(t->s + m->key, key, (size_t)len) == 0;
}

/* What the scan looks for, and what it found. */
typedef struct {
    const char *outer, *inner;
    Py_ssize_t outer_len, inner_len;
    Py_ssize_t start, end; /* the array's offsets, start -1 until found */
    PyObject *ends;        /* each item's end, counted from the array's `[` */
} Scan;

/* The value of a member the scan wants, at p: the offset past it, -1 when the text is
   not what it wants, -2 with an error set. */
typedef Py_ssize_t (*Take)(const Text *t, Py_ssize_t p, Scan *scan);

/* p at an object's `{`: each member skipped but `key`'s, whose value (it must open with
   `opener`, and there must be one such member) `take` reads; the offset past the `}`,
   -1 when the text does not fit, -2 with an error set. */
static Py_ssize_t object_member(const Text *t, Py_ssize_t p, const char *key, Py_ssize_t len,
                                unsigned char opener, Take take, Scan *scan) {
    if (p >= t->n || t->s[p] != '{') return -1;
    p++;
    int seen = 0, r;
    Member m;
    for (int first = 1; (r = next_member(t, &p, first, &m)) == 1; first = 0) {
        if (!key_is(t, &m, key, len)) {
            p = skip_value(t, p);
        } else if (seen++ || t->s[p] != opener) {
            return -1;
        } else {
            p = take(t, p, scan);
        }
        if (p < 0) return p;
    }
    return r < 0 ? -1 : p;
}

/* The wanted array, at its `[`: each item's end into scan->ends. */
static Py_ssize_t take_array(const Text *t, Py_ssize_t p, Scan *scan) {
    Py_ssize_t start = p++;
    for (int first = 1;; first = 0) {
        p = skip_ws(t, p);
        if (p >= t->n) return -1;
        if (t->s[p] == ']') break;
        if (!first) {
            if (t->s[p] != ',') return -1;
            p = skip_ws(t, p + 1);
        }
        p = skip_value(t, p);
        if (p < 0) return -1;
        PyObject *end = PyLong_FromSsize_t(p - start);
        if (end == NULL || PyList_Append(scan->ends, end) < 0) {
            Py_XDECREF(end);
            return -2;
        }
        Py_DECREF(end);
    }
    scan->start = start;
    scan->end = p + 1;
    return p + 1;
}

/* The wanted outer object, at its `{`: its inner array taken. */
static Py_ssize_t take_outer(const Text *t, Py_ssize_t p, Scan *scan) {
    return object_member(t, p, scan->inner, scan->inner_len, '[', take_array, scan);
}

/* member_items(line, outer, inner, /) -> (start, end, ends) | None: see the top. */
static PyObject *member_items(PyObject *self, PyObject *args) {
    Py_buffer line;
    Scan scan = {NULL, NULL, 0, 0, -1, -1, NULL};
    if (!PyArg_ParseTuple(args, "y*y#y#:member_items", &line, &scan.outer, &scan.outer_len,
                          &scan.inner, &scan.inner_len))
        return NULL;
    Text t = {(const unsigned char *)line.buf, line.len};
    PyObject *result = NULL;
    scan.ends = PyList_New(0);
    if (scan.ends != NULL) {
        Py_ssize_t p = object_member(&t, skip_ws(&t, 0), scan.outer, scan.outer_len, '{',
                                     take_outer, &scan);
        if (p == -2) {
            /* an error is set: result stays NULL */
        } else if (p < 0 || scan.start < 0 || skip_ws(&t, p) != t.n) {
            /* not exact, no such array, or more than one value in the text */
            result = Py_NewRef(Py_None);
        } else {
            result = Py_BuildValue("nnO", scan.start, scan.end, scan.ends);
        }
        Py_DECREF(scan.ends);
    }
    PyBuffer_Release(&line);
    return result;
}

static PyMethodDef methods[] = {
    {"member_items", member_items, METH_VARARGS,
     "Where an object member's array and its items lie in a JSON text."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_jsonspans", "Where a request's list lies in its JSON line.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__jsonspans(void) { return PyModule_Create(&module); }
