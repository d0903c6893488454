/* Reads and checks a batch's msgpack columns at C speed, for app.services.ingest.decode's
 * StoredBatch. It serves the fragments, which hold nine tenths of a batch's values and are read
 * by the API and again by the store.
 *
 * ints(data, start, end, bits) -> array.array ('q' for bits 64, 'i' for bits 32)
 *     data[start:end] must be one msgpack array of integers (no nil, no bool, no float), each a
 *     signed integer of that many bits.
 * texts(data, start, end, keep) -> a list of bytes when keep is true, else how many there are
 *     data[start:end] must be one msgpack array of str (or bin) values, each UTF-8 without NUL,
 *     as PostgreSQL's text holds it. The values are given as their UTF-8 bytes, undecoded.
 *
 * Anything else raises ValueError saying what is wrong, and the caller reports it as the whole
 * batch's check would.
 *
 * It also makes three checks over such arrays, without making an int object for each value:
 * bounds(values) -> (min, max), or None when the array is empty
 * ascending(values) -> whether each value is greater than the one before (so none comes twice)
 * among(values, keys) -> whether every value is one of keys (arrays of 'q'), or None when the
 *     keys collide too much for its table; a set must then answer.
 *
 * And it splits the catalog's message-ids, which are stored as a local part and a host's number:
 * split_hosts(ids) -> (locals, numbers, hosts)
 *     Each message-id (bytes) is cut before its last '@'; the host runs from that '@' to the end,
 *     or is b'' when there is none. It returns the local parts, an array('i') of host numbers,
 *     and the hosts in the order they were first seen (number i is hosts[i]).
 * take(numbers, table) -> array('i'): table[n] for each n of numbers (both arrays of 'i').
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *array_type; /* array.array */
/* among()'s hash seed, random for each process, so that keys chosen by a batch's sender cannot be
 * made to collide. */
static uint64_t hash_seed;

struct reader {
    const unsigned char *p, *end;
};

static int truncated(void)
{
    PyErr_SetString(PyExc_ValueError, "a column ends inside a value");
    return -1;
}

static uint64_t big(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v = v << 8 | p[i];
    return v;
}

/* Reads a length stored in `bytes` bytes after the type byte. */
static int read_length(struct reader *in, int bytes, Py_ssize_t *n)
{
    if (in->end - in->p < bytes)
        return truncated();
    uint64_t length = big(in->p, bytes);
    if (length > (uint64_t)(in->end - in->p)) /* each item takes a byte at least */
        return truncated();
    *n = (Py_ssize_t)length;
    in->p += bytes;
    return 0;
}

static int read_array_header(struct reader *in, Py_ssize_t *n)
{
    if (in->p >= in->end)
        return truncated();
    unsigned char type = *in->p++;
    if ((type & 0xF0) == 0x90) {
        *n = type & 0x0F;
        return 0;
    }
    if (type == 0xDC)
        return read_length(in, 2, n);
    if (type == 0xDD)
        return read_length(in, 4, n);
    PyErr_SetString(PyExc_ValueError, "a column must be an array");
    return -1;
}

static int not_an_integer(void)
{
    PyErr_SetString(PyExc_ValueError, "must hold integers");
    return -1;
}

static int read_int(struct reader *in, long long *v)
{
    if (in->p >= in->end)
        return truncated();
    unsigned char type = *in->p++;
    if (type <= 0x7F) {
        *v = type;
        return 0;
    }
    if (type >= 0xE0) {
        *v = (signed char)type;
        return 0;
    }
    int bytes;
    switch (type) {
    case 0xCC: case 0xD0: bytes = 1; break;
    case 0xCD: case 0xD1: bytes = 2; break;
    case 0xCE: case 0xD2: bytes = 4; break;
    case 0xCF: case 0xD3: bytes = 8; break;
    default: return not_an_integer();
    }
    if (in->end - in->p < bytes)
        return truncated();
    uint64_t raw = big(in->p, bytes);
    in->p += bytes;
    if (type >= 0xD0) { /* signed: sign-extended from its width */
        int shift = 64 - 8 * bytes;
        *v = shift ? (long long)(raw << shift) >> shift : (long long)raw;
    } else if (raw > INT64_MAX) {
        PyErr_SetString(PyExc_ValueError, "holds an integer outside 64 bits");
        return -1;
    } else {
        *v = (long long)raw;
    }
    return 0;
}

/* Whether s is UTF-8 as Python's strict decoder takes it (no overlong forms, no surrogates,
 * nothing past U+10FFFF) and holds no NUL. */
static int utf8_without_nul(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        if (n - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ULL)) { /* ASCII: only a NUL to look for */
                if ((w - 0x0101010101010101ULL) & ~w & 0x8080808080808080ULL)
                    return 0;
                i += 8;
                continue;
            }
        }
        unsigned c = s[i];
        if (c < 0x80) {
            if (c == 0)
                return 0;
            i++;
            continue;
        }
        int more;
        unsigned lo = 0x80, hi = 0xBF; /* the second byte's range */
        if (c >= 0xC2 && c <= 0xDF) {
            more = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            more = 2;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            more = 3;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else {
            return 0;
        }
        if (n - i <= more || s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (int k = 2; k <= more; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
        i += 1 + more;
    }
    return 1;
}

static int read_text(struct reader *in, const unsigned char **text, Py_ssize_t *n)
{
    if (in->p >= in->end)
        return truncated();
    unsigned char type = *in->p++;
    if ((type & 0xE0) == 0xA0) {
        *n = type & 0x1F;
    } else {
        int bytes;
        switch (type) {
        case 0xD9: case 0xC4: bytes = 1; break;
        case 0xDA: case 0xC5: bytes = 2; break;
        case 0xDB: case 0xC6: bytes = 4; break;
        default:
            PyErr_SetString(PyExc_ValueError, "must hold strings");
            return -1;
        }
        if (read_length(in, bytes, n) < 0)
            return -1;
    }
    if (in->end - in->p < *n)
        return truncated();
    *text = in->p;
    in->p += *n;
    if (!utf8_without_nul(*text, *n)) {
        PyErr_SetString(PyExc_ValueError, "must hold UTF-8 strings without NUL");
        return -1;
    }
    return 0;
}

/* Opens the column data[start:end]: holds its buffer in view and reads its array header. */
static int open_column(PyObject *data, Py_ssize_t start, Py_ssize_t end, Py_buffer *view, struct reader *in,
                       Py_ssize_t *n)
{
    if (PyObject_GetBuffer(data, view, PyBUF_SIMPLE) < 0)
        return -1;
    if (start < 0 || end < start || end > view->len) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "a column's span lies outside the data");
        return -1;
    }
    in->p = (const unsigned char *)view->buf + start;
    in->end = (const unsigned char *)view->buf + end;
    if (read_array_header(in, n) < 0 || *n > in->end - in->p) { /* each value takes a byte at least */
        if (!PyErr_Occurred())
            truncated();
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static int close_column(Py_buffer *view, struct reader *in)
{
    int whole = in->p == in->end;
    PyBuffer_Release(view);
    if (!whole) {
        PyErr_SetString(PyExc_ValueError, "a column's span holds more than its array");
        return -1;
    }
    return 0;
}

static PyObject *ints(PyObject *module, PyObject *args)
{
    PyObject *data, *packed = NULL, *result = NULL;
    Py_ssize_t start, end, n;
    int bits;
    Py_buffer view;
    struct reader in;

    if (!PyArg_ParseTuple(args, "Onni:ints", &data, &start, &end, &bits))
        return NULL;
    if (bits != 64 && bits != 32) {
        PyErr_SetString(PyExc_ValueError, "bits must be 64 or 32");
        return NULL;
    }
    if (open_column(data, start, end, &view, &in, &n) < 0)
        return NULL;
    if (n > PY_SSIZE_T_MAX / 8) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    packed = PyBytes_FromStringAndSize(NULL, n * (bits / 8));
    if (packed == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    char *out = PyBytes_AS_STRING(packed);
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v;
        if (read_int(&in, &v) < 0)
            goto fail;
        if (bits == 64) {
            int64_t w = v;
            memcpy(out + 8 * i, &w, 8);
        } else if (v < INT32_MIN || v > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "holds a value past 32 bits");
            goto fail;
        } else {
            int32_t w = (int32_t)v;
            memcpy(out + 4 * i, &w, 4);
        }
    }
    if (close_column(&view, &in) < 0) {
        Py_DECREF(packed);
        return NULL;
    }
    result = PyObject_CallFunction(array_type, "sO", bits == 64 ? "q" : "i", packed);
    Py_DECREF(packed);
    return result;
fail:
    PyBuffer_Release(&view);
    Py_DECREF(packed);
    return NULL;
}

static PyObject *texts(PyObject *module, PyObject *args)
{
    PyObject *data, *list = NULL;
    Py_ssize_t start, end, n;
    int keep;
    Py_buffer view;
    struct reader in;

    if (!PyArg_ParseTuple(args, "Onnp:texts", &data, &start, &end, &keep))
        return NULL;
    if (open_column(data, start, end, &view, &in, &n) < 0)
        return NULL;
    if (keep && (list = PyList_New(n)) == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *text;
        Py_ssize_t size;
        if (read_text(&in, &text, &size) < 0)
            goto fail;
        if (keep) {
            PyObject *value = PyBytes_FromStringAndSize((const char *)text, size);
            if (value == NULL)
                goto fail;
            PyList_SET_ITEM(list, i, value);
        }
    }
    if (close_column(&view, &in) < 0) {
        Py_XDECREF(list);
        return NULL;
    }
    return keep ? list : PyLong_FromSsize_t(n);
fail:
    PyBuffer_Release(&view);
    Py_XDECREF(list);
    return NULL;
}

/* Opens an array of 'q' or 'i' through the buffer protocol, to be read as int64 values. Returns
 * 0, or -1 with TypeError. */
static int int_view(PyObject *values, Py_buffer *view)
{
    if (PyObject_GetBuffer(values, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    const char *format = view->format ? view->format : "B";
    if ((format[0] != 'q' && format[0] != 'i') || format[1] != '\0'
            || view->itemsize != (format[0] == 'q' ? 8 : 4)) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "an array of 'q' or 'i' is needed");
        return -1;
    }
    return 0;
}

static inline long long item(const Py_buffer *view, Py_ssize_t i)
{
    return view->itemsize == 8 ? ((const int64_t *)view->buf)[i] : ((const int32_t *)view->buf)[i];
}

static PyObject *bounds(PyObject *module, PyObject *values)
{
    Py_buffer view;
    if (int_view(values, &view) < 0)
        return NULL;
    Py_ssize_t n = view.len / view.itemsize;
    if (n == 0) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    long long lo = item(&view, 0), hi = lo;
    for (Py_ssize_t i = 1; i < n; i++) {
        long long v = item(&view, i);
        if (v < lo)
            lo = v;
        else if (v > hi)
            hi = v;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(LL)", lo, hi);
}

static PyObject *ascending(PyObject *module, PyObject *values)
{
    Py_buffer view;
    if (int_view(values, &view) < 0)
        return NULL;
    Py_ssize_t n = view.len / view.itemsize;
    int ascending = 1;
    for (Py_ssize_t i = 1; i < n && ascending; i++)
        ascending = item(&view, i - 1) < item(&view, i);
    PyBuffer_Release(&view);
    return PyBool_FromLong(ascending);
}

#define MAX_PROBES 64

static inline size_t slot_of(int64_t v, int bits)
{
    uint64_t h = (uint64_t)v ^ hash_seed;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 33;
    return (size_t)(h >> (64 - bits));
}

static PyObject *among(PyObject *module, PyObject *args)
{
    PyObject *values_arg, *keys_arg, *result = NULL;
    Py_buffer values, keys;
    if (!PyArg_ParseTuple(args, "OO:among", &values_arg, &keys_arg))
        return NULL;
    if (int_view(values_arg, &values) < 0)
        return NULL;
    if (int_view(keys_arg, &keys) < 0) {
        PyBuffer_Release(&values);
        return NULL;
    }
    Py_ssize_t nkeys = keys.len / keys.itemsize, n = values.len / values.itemsize;
    /* The keys go into an open-addressing table at most half full, placed by a keyed mix (murmur3's
     * finalizer of the key xor a random seed). Should a probe still run long, the table is given
     * up and None is returned, so that the caller asks a set instead. */
    int bits = 4;
    while (((Py_ssize_t)1 << bits) < 2 * nkeys)
        bits++;
    size_t size = (size_t)1 << bits, mask = size - 1;
    int64_t *slots = PyMem_Malloc(size * sizeof *slots);
    unsigned char *used = PyMem_Calloc(size, 1);
    int all = 1, have_last = 0, gave_up = 0;
    if (slots == NULL || used == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nkeys && !gave_up; i++) {
        int64_t v = item(&keys, i);
        size_t at = slot_of(v, bits), probes = 0;
        while (used[at] && slots[at] != v && !(gave_up = ++probes > MAX_PROBES))
            at = (at + 1) & mask;
        if (gave_up)
            break;
        used[at] = 1;
        slots[at] = v;
    }
    int64_t last = 0;
    for (Py_ssize_t i = 0; i < n && all && !gave_up; i++) {
        int64_t v = item(&values, i);
        if (have_last && v == last) /* a file's fragments mostly come one after another */
            continue;
        size_t at = slot_of(v, bits), probes = 0;
        while (used[at] && slots[at] != v && !(gave_up = ++probes > MAX_PROBES))
            at = (at + 1) & mask;
        all = used[at] && slots[at] == v;
        last = v;
        have_last = 1;
    }
    if (gave_up) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    result = PyBool_FromLong(all);
done:
    PyMem_Free(slots);
    PyMem_Free(used);
    PyBuffer_Release(&values);
    PyBuffer_Release(&keys);
    return result;
}

static PyObject *split_hosts(PyObject *module, PyObject *ids_arg)
{
    PyObject *ids = PySequence_Tuple(ids_arg), *locals = NULL, *hosts = NULL, *numbers = NULL, *seen = NULL;
    PyObject *packed = NULL, *result = NULL;
    if (ids == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(ids);
    locals = PyList_New(n);
    hosts = PyList_New(0);
    seen = PyDict_New();
    packed = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int32_t));
    if (locals == NULL || hosts == NULL || seen == NULL || packed == NULL)
        goto done;
    int32_t *out = (int32_t *)PyBytes_AS_STRING(packed), last_number = -1;
    const char *last_host = NULL;
    Py_ssize_t last_size = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *id = PyTuple_GET_ITEM(ids, i);
        if (!PyBytes_Check(id)) {
            PyErr_Format(PyExc_TypeError, "a message-id must be bytes, not %.100s", Py_TYPE(id)->tp_name);
            goto done;
        }
        const char *text = PyBytes_AS_STRING(id);
        Py_ssize_t size = PyBytes_GET_SIZE(id), at = size;
        while (at > 0 && text[at - 1] != '@')
            at--;
        at = at > 0 ? at - 1 : size; /* the last '@', or none: an empty host */
        PyObject *local = PyBytes_FromStringAndSize(text, at);
        if (local == NULL)
            goto done;
        PyList_SET_ITEM(locals, i, local);
        const char *host = text + at;
        Py_ssize_t host_size = size - at;
        /* A poster's articles come one after another: most hosts are the one before. */
        if (host_size != last_size || memcmp(host, last_host, (size_t)host_size) != 0) {
            PyObject *key = PyBytes_FromStringAndSize(host, host_size), *number;
            if (key == NULL)
                goto done;
            number = PyDict_GetItemWithError(seen, key);
            if (number == NULL && PyErr_Occurred()) {
                Py_DECREF(key);
                goto done;
            }
            if (number == NULL) {
                Py_ssize_t count = PyList_GET_SIZE(hosts);
                if (count >= INT32_MAX) {
                    Py_DECREF(key);
                    PyErr_SetString(PyExc_ValueError, "too many hosts");
                    goto done;
                }
                number = PyLong_FromSsize_t(count);
                int failed = number == NULL || PyDict_SetItem(seen, key, number) < 0 || PyList_Append(hosts, key) < 0;
                Py_XDECREF(number);
                if (failed) {
                    Py_DECREF(key);
                    goto done;
                }
                last_number = (int32_t)count;
            } else {
                last_number = (int32_t)PyLong_AsLong(number);
            }
            Py_DECREF(key);
            last_host = host;
            last_size = host_size;
        }
        out[i] = last_number;
    }
    numbers = PyObject_CallFunction(array_type, "sO", "i", packed);
    if (numbers != NULL)
        result = PyTuple_Pack(3, locals, numbers, hosts);
done:
    Py_XDECREF(ids);
    Py_XDECREF(locals);
    Py_XDECREF(hosts);
    Py_XDECREF(seen);
    Py_XDECREF(packed);
    Py_XDECREF(numbers);
    return result;
}

static PyObject *take(PyObject *module, PyObject *args)
{
    PyObject *numbers_arg, *table_arg, *packed = NULL, *result = NULL;
    Py_buffer numbers, table;
    if (!PyArg_ParseTuple(args, "OO:take", &numbers_arg, &table_arg))
        return NULL;
    if (int_view(numbers_arg, &numbers) < 0)
        return NULL;
    if (int_view(table_arg, &table) < 0) {
        PyBuffer_Release(&numbers);
        return NULL;
    }
    if (numbers.itemsize != 4 || table.itemsize != 4) {
        PyErr_SetString(PyExc_TypeError, "take needs arrays of 'i'");
        goto done;
    }
    Py_ssize_t n = numbers.len / 4, size = table.len / 4;
    packed = PyBytes_FromStringAndSize(NULL, numbers.len);
    if (packed == NULL)
        goto done;
    int32_t *out = (int32_t *)PyBytes_AS_STRING(packed);
    const int32_t *in = numbers.buf, *lut = table.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (in[i] < 0 || in[i] >= size) {
            PyErr_SetString(PyExc_IndexError, "a number past the table");
            goto done;
        }
        out[i] = lut[in[i]];
    }
    result = PyObject_CallFunction(array_type, "sO", "i", packed);
done:
    Py_XDECREF(packed);
    PyBuffer_Release(&numbers);
    PyBuffer_Release(&table);
    return result;
}

/* The interface's version, the module's VERSION: edge.digest.compiled.VERSIONS holds the one the
 * Python code expects, and a build whose VERSION differs (made from other sources) is refused when
 * loaded. Raise both together with any change to what a function takes or gives. */
#define INTERFACE_VERSION 1

static PyMethodDef methods[] = {
    {"split_hosts", split_hosts, METH_O,
     "split_hosts(ids) -> (locals, numbers, hosts): message-ids cut before their last '@'."},
    {"take", take, METH_VARARGS, "take(numbers, table) -> array('i'): table[n] for each n."},
    {"bounds", bounds, METH_O, "bounds(values) -> (min, max) of an array of 'q' or 'i', or None when empty."},
    {"ascending", ascending, METH_O,
     "ascending(values) -> bool: each value of an array of 'q' or 'i' greater than the one before."},
    {"among", among, METH_VARARGS,
     "among(values, keys) -> bool: every value is one of keys (arrays); None: ask a set instead."},
    {"ints", ints, METH_VARARGS, "ints(data, start, end, bits) -> array: a msgpack array of integers, checked."},
    {"texts", texts, METH_VARARGS,
     "texts(data, start, end, keep) -> list of bytes, or their count: a msgpack array of UTF-8 text without NUL."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_msgcolumns", "A batch's msgpack columns read and checked at C speed.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__msgcolumns(void)
{
    PyObject *arraymod = PyImport_ImportModule("array");
    if (arraymod == NULL)
        return NULL;
    array_type = PyObject_GetAttrString(arraymod, "array");
    Py_DECREF(arraymod);
    if (array_type == NULL)
        return NULL;
    PyObject *osmod = PyImport_ImportModule("os");
    PyObject *seed = osmod ? PyObject_CallMethod(osmod, "urandom", "i", 8) : NULL;
    Py_XDECREF(osmod);
    if (seed == NULL)
        return NULL;
    memcpy(&hash_seed, PyBytes_AS_STRING(seed), sizeof hash_seed);
    Py_DECREF(seed);
    PyObject *created = PyModule_Create(&module);
    if (created != NULL && PyModule_AddIntConstant(created, "VERSION", INTERFACE_VERSION) < 0)
        Py_CLEAR(created);
    return created;
}
