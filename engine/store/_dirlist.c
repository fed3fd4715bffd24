/* A session directory's listing, sorted into memory folders and everything else
(engine.store.dir_listing says why).

`folders_and_others(path, stat_all=False)`: the directory's entries, but `.` and `..`,
as two collections:

* a set of the names of the directories whose name is a memory folder's
  (engine.store.ids.is_folder_id: `mem-` then one or more of `A-Za-z0-9._-`, 255 bytes at
  most);
* a list of (name, kind) for every other entry, in the order the directory gives them:
  kind 1 a directory, 2 a regular file, 0 anything else (a symbolic link is never
  followed: it is 0).

What `os.scandir` and `DirEntry.is_dir` / `is_file(follow_symlinks=False)` give, name
for name: the kind is the entry's type where the directory tells it, else `lstat`'s
(`stat_all` asks `lstat` for every entry, which the tests use to check that path; an
entry that is gone by then is 0). Names are decoded as `os.fsdecode` decodes them.

The entries are read a batch at a time without the interpreter lock (the directory
reads and any `lstat`), then the batch's names are made into strings with it: other
threads run while the kernel lists 10^5 entries, and the memory held is one batch. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

enum { KIND_OTHER = 0, KIND_DIR = 1, KIND_FILE = 2 };
enum { BATCH_NAMES = 1024, BATCH_BYTES = 1024 * 256 };

typedef struct {
    char bytes[BATCH_BYTES]; /* names back to back, without their NUL */
    size_t start[BATCH_NAMES];
    size_t len[BATCH_NAMES];
    unsigned char kind[BATCH_NAMES];
    size_t count;
    size_t used;
    int done;  /* the directory has no more entries */
    int error; /* errno of a failed read, else 0 */
} Batch;

static unsigned char kind_of(DIR *dir, const struct dirent *d, int stat_all) {
#ifdef DT_UNKNOWN
    if (!stat_all && d->d_type != DT_UNKNOWN) {
        if (d->d_type == DT_DIR) return KIND_DIR;
        if (d->d_type == DT_REG) return KIND_FILE;
        return KIND_OTHER;
    }
#else
    (void)stat_all;
#endif
    struct stat st;
    if (fstatat(dirfd(dir), d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) return KIND_OTHER;
    if (S_ISDIR(st.st_mode)) return KIND_DIR;
    if (S_ISREG(st.st_mode)) return KIND_FILE;
    return KIND_OTHER;
}

/* Fill `b` from `dir` until it is full or the directory ends (b->done) or a read fails
   (b->error). Runs without the interpreter lock. An entry that does not fit is left to
   the next batch: `pending` holds it across calls. */
static void fill(DIR *dir, Batch *b, struct dirent **pending, int stat_all) {
    b->count = 0;
    b->used = 0;
    for (;;) {
        struct dirent *d = *pending;
        if (d == NULL) {
            errno = 0;
            d = readdir(dir);
            if (d == NULL) {
                b->error = errno;
                b->done = 1;
                return;
            }
        }
        const char *n = d->d_name;
        size_t len = strlen(n);
        if (n[0] == '.' && (len == 1 || (len == 2 && n[1] == '.'))) {
            *pending = NULL;
            continue;
        }
        if (b->count == BATCH_NAMES || b->used + len > BATCH_BYTES) {
            if (b->count == 0) { /* a name longer than a whole batch: no file system has one */
                b->error = ENAMETOOLONG;
                b->done = 1;
                return;
            }
            *pending = d; /* readdir's buffer holds it until the next readdir call */
            return;
        }
        *pending = NULL;
        memcpy(b->bytes + b->used, n, len);
        b->start[b->count] = b->used;
        b->len[b->count] = len;
        b->kind[b->count] = kind_of(dir, d, stat_all);
        b->used += len;
        b->count++;
    }
}

static int is_folder_name(const char *n, size_t len) {
    if (len < 5 || len > 255 || memcmp(n, "mem-", 4) != 0) return 0;
    for (size_t i = 4; i < len; i++) {
        unsigned char c = (unsigned char)n[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        if (!ok) return 0;
    }
    return 1;
}

/* The batch's names into `folders` / `others`; -1 with an exception set on failure. */
static int take(const Batch *b, PyObject *folders, PyObject *others) {
    for (size_t i = 0; i < b->count; i++) {
        const char *n = b->bytes + b->start[i];
        Py_ssize_t len = (Py_ssize_t)b->len[i];
        if (b->kind[i] == KIND_DIR && is_folder_name(n, b->len[i])) {
            PyObject *name = PyUnicode_DecodeASCII(n, len, NULL);
            if (name == NULL) return -1;
            int failed = PySet_Add(folders, name);
            Py_DECREF(name);
            if (failed) return -1;
            continue;
        }
        PyObject *name = PyUnicode_DecodeFSDefaultAndSize(n, len);
        if (name == NULL) return -1;
        PyObject *item = Py_BuildValue("(Ni)", name, (int)b->kind[i]);
        if (item == NULL) return -1;
        int failed = PyList_Append(others, item);
        Py_DECREF(item);
        if (failed) return -1;
    }
    return 0;
}

static PyObject *folders_and_others(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *keywords[] = {"path", "stat_all", NULL};
    PyObject *given = NULL; /* named in an error, as os.scandir names it */
    PyObject *path = NULL;
    int stat_all = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p", keywords, &given, &stat_all))
        return NULL;
    if (!PyUnicode_FSConverter(given, &path)) return NULL;
    DIR *dir;
    Py_BEGIN_ALLOW_THREADS
    dir = opendir(PyBytes_AS_STRING(path));
    Py_END_ALLOW_THREADS
    if (dir == NULL) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, given);
        Py_DECREF(path);
        return NULL;
    }
    Batch *b = PyMem_RawMalloc(sizeof(Batch));
    PyObject *folders = PySet_New(NULL);
    PyObject *others = PyList_New(0);
    if (b == NULL || folders == NULL || others == NULL) {
        if (b == NULL) PyErr_NoMemory();
        goto fail;
    }
    b->done = 0;
    b->error = 0;
    struct dirent *pending = NULL;
    while (!b->done) {
        Py_BEGIN_ALLOW_THREADS
        fill(dir, b, &pending, stat_all);
        Py_END_ALLOW_THREADS
        if (take(b, folders, others) != 0) goto fail;
    }
    if (b->error != 0) {
        errno = b->error;
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, given);
        goto fail;
    }
    PyMem_RawFree(b);
    closedir(dir);
    Py_DECREF(path);
    return Py_BuildValue("(NN)", folders, others);
fail:
    PyMem_RawFree(b);
    closedir(dir);
    Py_DECREF(path);
    Py_XDECREF(folders);
    Py_XDECREF(others);
    return NULL;
}

static PyMethodDef methods[] = {
    {"folders_and_others", (PyCFunction)(void (*)(void))folders_and_others,
     METH_VARARGS | METH_KEYWORDS,
     "A directory's memory folders (a set) and its other entries with their kinds."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_dirlist", "A session directory's listing in one pass.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__dirlist(void) { return PyModule_Create(&module); }
