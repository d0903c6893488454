/* Binary COPY rows at C speed: the twin of app.services.ingest.pgcopy's _pack_rows_python. It
 * makes no Python object for each value: no struct calls, no tuple for each row, and no join to
 * interleave the columns.
 *
 * pack_rows(kinds, columns, scan, counts=True) -> bytes
 *   kinds:   a sequence of kind names, one for each column: "int8", "int4", "float4", "timestamp"
 *            (unix seconds, for a timestamptz column), "text" (str, sent as UTF-8) or "utf8"
 *            (text given as UTF-8 bytes, which the caller checked);
 *   columns: a sequence of equally long sequences, one for each kind. An integer column may
 *            instead be an array.array of 'q' or 'i'; it is then read as C integers, without
 *            making an int object for each value;
 *   scan:    None is NULL when true; when false a None is refused like a value of the wrong type;
 *   counts:  false leaves out each row's field count: one column's values so packed are the
 *            elements of a binary array value (pgcopy.array_value).
 *
 * It returns the rows without a header or trailer: for each row an int16 field count, then for
 * each field an int32 length (-1 for NULL) and the value, big-endian (a timestamptz is an int8 of
 * microseconds since 2000-01-01 UTC). The bytes are the same as the Python packing's. So are the
 * refusals, of the classes the store takes for a malformed batch: struct.error for a number of
 * the wrong type or past its column's width, TypeError for text that is not str (or bytes, for
 * utf8), and ValueError for an unknown kind or columns of different lengths. It is narrower than
 * the Python packing in two ways that no caller meets: an integer column given as a buffer must
 * be an array of 'q' or 'i', and utf8 text must be bytes (the Python packing takes other integer
 * arrays and any bytes-like object).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum kind { K_INT8, K_INT4, K_FLOAT4, K_TIMESTAMP, K_TEXT, K_UTF8 };

static PyObject *struct_error; /* struct.error */

#define PG_EPOCH 946684800LL /* 2000-01-01 in unix seconds */

static int kind_of(PyObject *name, enum kind *out)
{
    static const struct { const char *name; enum kind kind; } names[] = {
        {"int8", K_INT8}, {"int4", K_INT4}, {"float4", K_FLOAT4},
        {"timestamp", K_TIMESTAMP}, {"text", K_TEXT}, {"utf8", K_UTF8},
    };
    Py_ssize_t size = 0;
    const char *text = PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, &size) : NULL;
    if (text != NULL) {
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            if ((size_t)size == strlen(names[i].name) && memcmp(text, names[i].name, (size_t)size) == 0) {
                *out = names[i].kind;
                return 0;
            }
        }
    }
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "no binary COPY kind %R", name);
    return -1;
}

/* Reads an integer the way struct packs one: an int, or anything with __index__. Anything else
 * raises struct.error. */
static int as_int64(PyObject *value, long long *out)
{
    int overflow = 0;
    if (PyLong_Check(value)) {
        *out = PyLong_AsLongLongAndOverflow(value, &overflow);
    } else if (PyIndex_Check(value)) {
        PyObject *index = PyNumber_Index(value);
        if (index == NULL)
            return -1;
        *out = PyLong_AsLongLongAndOverflow(index, &overflow);
        Py_DECREF(index);
    } else {
        PyErr_SetString(struct_error, "required argument is not an integer");
        return -1;
    }
    if (*out == -1 && PyErr_Occurred())
        return -1;
    if (overflow) {
        PyErr_SetString(struct_error, "argument out of range");
        return -1;
    }
    return 0;
}

static inline void put32(char *p, uint32_t v)
{
    p[0] = (char)(v >> 24); p[1] = (char)(v >> 16); p[2] = (char)(v >> 8); p[3] = (char)v;
}

static inline void put64(char *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

/* Checks a value and returns the bytes it takes in a row, its length word included, or -1 on
 * error. For text it sets *text and *size to the UTF-8 bytes, which stay valid while the value
 * lives. */
static Py_ssize_t field_size(enum kind kind, PyObject *value, int scan, const char **text, Py_ssize_t *size)
{
    if (value == Py_None) {
        if (scan)
            return 4;
        if (kind == K_TEXT || kind == K_UTF8)
            PyErr_SetString(PyExc_TypeError, "a NULL where the column may hold none");
        else
            PyErr_SetString(struct_error, "required argument is not an integer");
        return -1;
    }
    switch (kind) {
    case K_INT8:
    case K_INT4:
    case K_TIMESTAMP:
    case K_FLOAT4:
        return kind == K_INT8 || kind == K_TIMESTAMP ? 12 : 8;
    case K_TEXT:
        if (!PyUnicode_Check(value)) {
            PyErr_Format(PyExc_TypeError, "text must be str, not %.100s", Py_TYPE(value)->tp_name);
            return -1;
        }
        *text = PyUnicode_AsUTF8AndSize(value, size);
        if (*text == NULL)
            return -1;
        break;
    case K_UTF8:
        if (!PyBytes_Check(value)) {
            PyErr_Format(PyExc_TypeError, "utf8 text must be bytes, not %.100s", Py_TYPE(value)->tp_name);
            return -1;
        }
        *text = PyBytes_AS_STRING(value);
        *size = PyBytes_GET_SIZE(value);
        break;
    }
    if (*size > INT32_MAX) {
        PyErr_SetString(struct_error, "a text value past 2 GiB");
        return -1;
    }
    return 4 + *size;
}

/* Writes a value (not None) of a fixed kind at p after checking its range. Returns 0, or -1 on
 * error. */
static int put_fixed(enum kind kind, PyObject *value, char *p)
{
    long long n;
    switch (kind) {
    case K_INT8:
        if (as_int64(value, &n) < 0)
            return -1;
        put32(p, 8);
        put64(p + 4, (uint64_t)n);
        return 0;
    case K_INT4:
        if (as_int64(value, &n) < 0)
            return -1;
        if (n < INT32_MIN || n > INT32_MAX) {
            PyErr_SetString(struct_error, "'i' format requires -2147483648 <= number <= 2147483647");
            return -1;
        }
        put32(p, 4);
        put32(p + 4, (uint32_t)(int32_t)n);
        return 0;
    case K_TIMESTAMP: {
        long long micros;
        /* Only an int (or a bool) is taken, because the Python twin subtracts the epoch from it. */
        if (!PyLong_Check(value)) {
            PyErr_SetString(struct_error, "required argument is not an integer");
            return -1;
        }
        if (as_int64(value, &n) < 0)
            return -1;
        if (__builtin_sub_overflow(n, PG_EPOCH, &n) || __builtin_mul_overflow(n, 1000000LL, &micros)) {
            PyErr_SetString(struct_error, "argument out of range");
            return -1;
        }
        put32(p, 8);
        put64(p + 4, (uint64_t)micros);
        return 0;
    }
    case K_FLOAT4: {
        double x = PyFloat_Check(value) ? PyFloat_AS_DOUBLE(value) : PyFloat_AsDouble(value);
        if (x == -1.0 && PyErr_Occurred()) {
            if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_OverflowError)) {
                PyErr_Clear();
                PyErr_SetString(struct_error, "required argument is not a float");
            }
            return -1;
        }
        put32(p, 4);
        return PyFloat_Pack4(x, p + 4, 0); /* big-endian; OverflowError past a float's range */
    }
    default:
        return -1;
    }
}

/* A column holds its values as a tuple of its own (PySequence_Tuple copies the pointers), so that
 * Python code run for a value, such as __index__ or __float__, cannot change what is packed. An
 * integer column may instead be an array of signed 64- or 32-bit integers (array.array 'q' or
 * 'i'), read through the buffer protocol, which keeps the array from being resized meanwhile and
 * needs no int object for each value. */
struct column {
    enum kind kind;
    PyObject *fast;
    Py_buffer view;
    int itemsize; /* the item size of view, or 0 when the values are in fast */
};

static int open_column(struct column *col, PyObject *kind, PyObject *values, Py_ssize_t *rows)
{
    if (kind_of(kind, &col->kind) < 0)
        return -1;
    if ((col->kind == K_INT8 || col->kind == K_INT4) && PyObject_CheckBuffer(values) && !PyBytes_Check(values)
            && !PyByteArray_Check(values)) {
        if (PyObject_GetBuffer(values, &col->view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
            return -1;
        const char *format = col->view.format ? col->view.format : "B";
        if (format[0] == '@' || format[0] == '=')
            format++;
        /* The format must be one type code after the byte-order mark. A format of just "@" (or an
         * empty one) has no type code, and its second char would be past its end. */
        if (format[0] == '\0' || format[1] != '\0' || !((col->view.itemsize == 8 && strchr("qln", format[0]) != NULL)
                                   || (col->view.itemsize == 4 && format[0] == 'i'))) {
            PyBuffer_Release(&col->view);
            PyErr_SetString(PyExc_TypeError, "an integer column given as an array must be of 'q' or 'i'");
            return -1;
        }
        col->itemsize = (int)col->view.itemsize;
        *rows = col->view.len / col->itemsize;
        return 0;
    }
    col->fast = PySequence_Tuple(values);
    if (col->fast == NULL)
        return -1;
    *rows = PyTuple_GET_SIZE(col->fast);
    return 0;
}

static void close_column(struct column *col)
{
    if (col->itemsize)
        PyBuffer_Release(&col->view);
    Py_XDECREF(col->fast);
}

/* Writes row r of an array column, whose kind is int8 or int4, at p. */
static int put_from_array(const struct column *col, Py_ssize_t r, char *p)
{
    long long n = col->itemsize == 8 ? ((const int64_t *)col->view.buf)[r] : ((const int32_t *)col->view.buf)[r];
    if (col->kind == K_INT8) {
        put32(p, 8);
        put64(p + 4, (uint64_t)n);
        return 12;
    }
    if (n < INT32_MIN || n > INT32_MAX) {
        PyErr_SetString(struct_error, "'i' format requires -2147483648 <= number <= 2147483647");
        return -1;
    }
    put32(p, 4);
    put32(p + 4, (uint32_t)(int32_t)n);
    return 8;
}

static PyObject *pack_rows(PyObject *module, PyObject *args)
{
    PyObject *kinds_arg, *columns_arg, *result = NULL;
    PyObject *kinds_seq = NULL, *columns_seq = NULL;
    struct column *cols = NULL;
    int scan, counts = 1;
    Py_ssize_t ncols = 0, nrows = 0, c, r;

    if (!PyArg_ParseTuple(args, "OOp|p:pack_rows", &kinds_arg, &columns_arg, &scan, &counts))
        return NULL;
    kinds_seq = PySequence_Tuple(kinds_arg);
    columns_seq = kinds_seq ? PySequence_Tuple(columns_arg) : NULL;
    if (columns_seq == NULL)
        goto done;
    ncols = PyTuple_GET_SIZE(columns_seq);
    if (ncols != PyTuple_GET_SIZE(kinds_seq) || ncols == 0 || ncols > INT16_MAX) {
        PyErr_SetString(PyExc_ValueError, "one kind for each column, and 1 to 32767 columns");
        goto done;
    }
    cols = PyMem_Calloc((size_t)ncols, sizeof *cols);
    if (cols == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (c = 0; c < ncols; c++) {
        Py_ssize_t rows;
        if (open_column(&cols[c], PyTuple_GET_ITEM(kinds_seq, c), PyTuple_GET_ITEM(columns_seq, c),
                        &rows) < 0) {
            ncols = c; /* the columns opened so far are closed below */
            goto done;
        }
        if (c == 0)
            nrows = rows;
        else if (rows != nrows) {
            ncols = c + 1;
            PyErr_SetString(PyExc_ValueError, "columns of different lengths");
            goto done;
        }
    }

    /* The first pass finds the payload's size. Only text, and NULLs where they are allowed, change
     * a row's size, so the other columns' values are checked as they are written. */
    Py_ssize_t total = 0;
    for (c = 0; c < ncols; c++) {
        enum kind kind = cols[c].kind;
        int fixed = kind != K_TEXT && kind != K_UTF8;
        if (fixed && (!scan || cols[c].itemsize)) {
            Py_ssize_t bytes;
            if (__builtin_mul_overflow(nrows, (Py_ssize_t)(kind == K_INT8 || kind == K_TIMESTAMP ? 12 : 8), &bytes)
                    || __builtin_add_overflow(total, bytes, &total))
                goto too_large;
            continue;
        }
        PyObject **items = &PyTuple_GET_ITEM(cols[c].fast, 0);
        for (r = 0; r < nrows; r++) {
            const char *text;
            Py_ssize_t size, bytes = field_size(kind, items[r], scan, &text, &size);
            if (bytes < 0)
                goto done;
            if (__builtin_add_overflow(total, bytes, &total))
                goto too_large;
        }
    }
    Py_ssize_t count_bytes = counts ? 2 : 0; /* each row's field count */
    if (nrows > PY_SSIZE_T_MAX / 2 || __builtin_add_overflow(total, count_bytes * nrows, &total))
        goto too_large;
    result = PyBytes_FromStringAndSize(NULL, total);
    if (result == NULL)
        goto done;

    /* The second pass writes the rows, each write bounded by the size the first pass found. The
     * columns are tuples of their own or held arrays, so nothing should differ; the bounds are
     * the last guard. */
    char *p = PyBytes_AS_STRING(result), *end = p + total;
    for (r = 0; r < nrows; r++) {
        if (counts) {
            if (end - p < 2)
                goto changed;
            p[0] = (char)(ncols >> 8);
            p[1] = (char)ncols;
            p += 2;
        }
        for (c = 0; c < ncols; c++) {
            const struct column *col = &cols[c];
            if (col->itemsize) { /* a fixed width, which the first pass sized exactly */
                if (end - p < (col->kind == K_INT8 ? 12 : 8))
                    goto changed;
                int bytes = put_from_array(col, r, p);
                if (bytes < 0)
                    goto fail;
                p += bytes;
                continue;
            }
            PyObject *value = PyTuple_GET_ITEM(col->fast, r);
            const char *text = NULL;
            Py_ssize_t size = 0, bytes = field_size(col->kind, value, scan, &text, &size);
            if (bytes < 0)
                goto fail;
            if (bytes > end - p - (nrows - r - 1) * count_bytes)
                goto changed;
            if (value == Py_None) {
                put32(p, 0xFFFFFFFFu);
            } else if (text != NULL) {
                put32(p, (uint32_t)size);
                memcpy(p + 4, text, (size_t)size);
            } else if (put_fixed(col->kind, value, p) < 0) {
                goto fail;
            }
            p += bytes;
        }
    }
    if (p != end)
        goto changed;
    goto done;
too_large:
    PyErr_NoMemory();
    goto done;
changed:
    PyErr_SetString(PyExc_RuntimeError, "a value packed to another size than it was measured at");
fail:
    Py_CLEAR(result);
done:
    if (cols != NULL)
        for (c = 0; c < ncols; c++)
            close_column(&cols[c]);
    PyMem_Free(cols);
    Py_XDECREF(kinds_seq);
    Py_XDECREF(columns_seq);
    return result;
}

/* The interface's version, the module's VERSION: edge.digest.compiled.VERSIONS holds the one the
 * Python code expects, and a build whose VERSION differs (made from other sources) is refused when
 * loaded. Raise both together with any change to what a function takes or gives. */
#define INTERFACE_VERSION 2

static PyMethodDef methods[] = {
    {"pack_rows", pack_rows, METH_VARARGS,
     "pack_rows(kinds, columns, scan, counts=True) -> bytes: equal-length columns as binary COPY rows."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_copyrows", "Binary COPY rows at C speed (see app/services/ingest/pgcopy.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__copyrows(void)
{
    PyObject *structmod = PyImport_ImportModule("struct");
    if (structmod == NULL)
        return NULL;
    struct_error = PyObject_GetAttrString(structmod, "error");
    Py_DECREF(structmod);
    if (struct_error == NULL)
        return NULL;
    PyObject *created = PyModule_Create(&module);
    if (created != NULL && PyModule_AddIntConstant(created, "VERSION", INTERFACE_VERSION) < 0)
        Py_CLEAR(created);
    return created;
}
