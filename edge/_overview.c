/* The edge's per-line hot loops in C, each the twin of Python code beside it (same results):
 *
 *   clean_columns(data, subject, poster, date, message_id, size, min_fields, lowest, highest,
 *                 max_size)
 *       the fast path of edge.overview.parse_block_in_order: a clean block of CRLF-terminated
 *       overview lines (no NUL, every line with as many fields as the first, the last field not
 *       one of those read, every number and size ASCII digits, every message-id non-empty,
 *       numbers in lowest..highest, sizes at most max_size) as its columns:
 *       (numbers, subjects, posters, dates, message_ids, sizes, consecutive), numbers a range
 *       when they are consecutive (digit strings of one length, each one more than the last),
 *       else a list. Any other block gives None: the Python code then reads it line by line,
 *       counting its rejects.
 *   number_lines(subjects, posters, tails, read_tail, file_numbers)
 *       edge.gather's numbering of a block's lines into files (see the function).
 *   dot_line(data)
 *       where the first line that starts with a dot starts in data (data starting at a line
 *       start; the index of that dot, after an LF), or -1: edge.nntp's _DOT_AFTER_LF search.
 *   add_to_files(numbers, sizes, dates, fragments, bytes, last_dates)
 *       edge.gather's loop adding a block's lines to their files (see the function).
 *
 * Only bytes objects are read (callers make sure); a block is read once, the objects made are
 * the columns' own. Optional: without a C compiler the install goes on and the Python serves.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MAX_INT64_VALUE 9223372036854775807LL

/* ASCII digits (at least one) as a value; 0 on success, -1 when not digits or past 2^63 - 1 */
static int read_digits(const char *p, Py_ssize_t n, long long *out)
{
    unsigned long long value = 0;
    if (n <= 0)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i] - '0';
        if (c > 9)
            return -1;
        if (value > ((unsigned long long)MAX_INT64_VALUE - c) / 10)
            return -1;  /* past it (leading zeros stay fine: value stays 0) */
        value = value * 10 + c;
    }
    *out = (long long)value;
    return 0;
}

typedef struct {
    PyObject *subjects, *posters, *dates, *message_ids, *sizes, *numbers;
} Columns;

static void columns_clear(Columns *c)
{
    Py_CLEAR(c->subjects);
    Py_CLEAR(c->posters);
    Py_CLEAR(c->dates);
    Py_CLEAR(c->message_ids);
    Py_CLEAR(c->sizes);
    Py_CLEAR(c->numbers);
}

static PyObject *clean_columns(PyObject *self, PyObject *args)
{
    PyObject *data;
    Py_ssize_t subject, poster, date, message_id, size_field, min_fields;
    long long lowest, highest, max_size;
    if (!PyArg_ParseTuple(args, "O!nnnnnnLLL", &PyBytes_Type, &data, &subject, &poster, &date, &message_id,
                          &size_field, &min_fields, &lowest, &highest, &max_size))
        return NULL;
    const char *start = PyBytes_AS_STRING(data);
    Py_ssize_t length = PyBytes_GET_SIZE(data);
    if (length < 2 || start[length - 2] != '\r' || start[length - 1] != '\n' || memchr(start, 0, length))
        Py_RETURN_NONE;
    if (lowest < 1)
        lowest = 1;
    if (highest < lowest)
        Py_RETURN_NONE;
    if (subject < 1 || poster < 1 || date < 1 || message_id < 1 || size_field < 1)
        Py_RETURN_NONE;

    /* the first line's width: its tabs, up to its CRLF */
    const char *first_end = memchr(start, '\n', length);
    if (first_end == NULL || first_end == start || first_end[-1] != '\r')
        Py_RETURN_NONE;
    Py_ssize_t width = 1;
    for (const char *p = start; p < first_end - 1; p++)
        width += (*p == '\t');
    if (width < min_fields || width - 1 == subject || width - 1 == poster || width - 1 == date
        || width - 1 == message_id || width - 1 == size_field)
        Py_RETURN_NONE;

    Columns c = {PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0), NULL};
    if (!c.subjects || !c.posters || !c.dates || !c.message_ids || !c.sizes) {
        columns_clear(&c);
        return NULL;
    }
    /* the numbers: first_number.. previous while they are consecutive, c.numbers a list once not */
    long long first_number = 0, previous = 0;
    Py_ssize_t number_length = -1, lines = 0;
    int consecutive = 1;

    const char *line = start, *end = start + length;
    /* The line before's poster: a file's articles come one after another, each with the same
     * From, so its object is used again (no copy, and its hash is computed once, for the
     * numbering's key) where the bytes are the same. */
    PyObject *last_poster = NULL;  /* borrowed: c.posters holds it */
    /* field spans of one line; width can be large, only the ones read are kept */
    while (line < end) {
        const char *eol = memchr(line, '\n', end - line);
        if (eol == NULL || eol == line || eol[-1] != '\r')
            goto unclean;
        const char *field = line, *stop = eol - 1;  /* the CR: the last field ends there */
        const char *spans[5] = {NULL, NULL, NULL, NULL, NULL};
        Py_ssize_t lengths[5] = {0, 0, 0, 0, 0};
        const Py_ssize_t wanted[5] = {subject, poster, date, message_id, size_field};
        const char *number_field = NULL;
        Py_ssize_t number_len = 0, index = 0;
        for (;;) {
            const char *tab = memchr(field, '\t', stop - field);
            const char *field_end = tab ? tab : stop;
            if (index == 0) {
                number_field = field;
                number_len = field_end - field;
            }
            for (int k = 0; k < 5; k++) {
                if (wanted[k] == index) {
                    spans[k] = field;
                    lengths[k] = field_end - field;
                }
            }
            index++;
            if (tab == NULL)
                break;
            field = tab + 1;
        }
        if (index != width)
            goto unclean;
        long long number, size;
        if (read_digits(number_field, number_len, &number) < 0 || read_digits(spans[4], lengths[4], &size) < 0
            || lengths[3] == 0 || number < lowest || number > highest || size > max_size)
            goto unclean;
        if (lines == 0) {
            first_number = number;
            number_length = number_len;
        } else {
            if (consecutive && (previous == MAX_INT64_VALUE || number != previous + 1 || number_len != number_length)) {
                /* the numbers so far were first_number.. previous: a list from here */
                consecutive = 0;
                c.numbers = PyList_New(lines);
                if (c.numbers == NULL)
                    goto error;
                for (Py_ssize_t i = 0; i < lines; i++) {
                    PyObject *value = PyLong_FromLongLong(first_number + i);
                    if (value == NULL)
                        goto error;
                    PyList_SET_ITEM(c.numbers, i, value);
                }
            }
        }
        if (!consecutive) {
            PyObject *value = PyLong_FromLongLong(number);
            if (value == NULL || PyList_Append(c.numbers, value) < 0) {
                Py_XDECREF(value);
                goto error;
            }
            Py_DECREF(value);
        }
        previous = number;
        PyObject *same_poster = NULL;
        if (last_poster != NULL && PyBytes_GET_SIZE(last_poster) == lengths[1]
                && memcmp(PyBytes_AS_STRING(last_poster), spans[1], lengths[1]) == 0)
            same_poster = Py_NewRef(last_poster);
        PyObject *items[5] = {
            PyBytes_FromStringAndSize(spans[0], lengths[0]),
            same_poster ? same_poster : PyBytes_FromStringAndSize(spans[1], lengths[1]),
            PyBytes_FromStringAndSize(spans[2], lengths[2]), PyBytes_FromStringAndSize(spans[3], lengths[3]),
            PyLong_FromLongLong(size)};
        last_poster = items[1];  /* appended below, or the block fails */
        PyObject *lists[5] = {c.subjects, c.posters, c.dates, c.message_ids, c.sizes};
        int failed = 0;
        for (int k = 0; k < 5; k++) {
            if (items[k] == NULL || (!failed && PyList_Append(lists[k], items[k]) < 0))
                failed = 1;
            Py_XDECREF(items[k]);
        }
        if (failed)
            goto error;
        lines++;
        line = eol + 1;
    }
    if (consecutive) {
        /* its stop may be 2^63: unsigned */
        c.numbers = PyObject_CallFunction((PyObject *)&PyRange_Type, "LK", first_number,
                                          (unsigned long long)previous + 1);
        if (c.numbers == NULL)
            goto error;
    }
    PyObject *result = Py_BuildValue("(OOOOOOO)", c.numbers, c.subjects, c.posters, c.dates, c.message_ids,
                                     c.sizes, consecutive ? Py_True : Py_False);
    columns_clear(&c);
    return result;

unclean:
    columns_clear(&c);
    Py_RETURN_NONE;
error:
    columns_clear(&c);
    return NULL;
}

static PyObject *dot_line(PyObject *self, PyObject *arg)
{
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "dot_line reads bytes");
        return NULL;
    }
    const char *start = PyBytes_AS_STRING(arg), *end = start + PyBytes_GET_SIZE(arg), *p = start;
    while (p < end) {
        const char *lf = memchr(p, '\n', end - p);
        if (lf == NULL || lf + 1 >= end)
            break;
        if (lf[1] == '.')
            return PyLong_FromSsize_t(lf + 1 - start);
        p = lf + 1;
    }
    return PyLong_FromLong(-1);
}

/* Whether two objects are bytes with the same contents (b is NULL or bytes) */
static inline int same_bytes(PyObject *a, PyObject *b)
{
    if (a == b)
        return b != NULL;
    return b != NULL && PyBytes_Check(a) && PyBytes_GET_SIZE(a) == PyBytes_GET_SIZE(b)
           && memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b)) == 0;
}

/* number_lines(subjects, posters, tails, read_tail, file_numbers): edge.gather's numbering of a
 * block's lines into files. Each subject is cut at its last "(": the text after it is looked up in
 * tails (read_tail(text) read into it when missing), which gives (part, parts, text after the
 * counter) or False; the file is file_numbers[(poster, text before, text after the counter)] (a
 * defaultdict numbering new keys). Gives (file numbers, counters), or None as soon as a line has
 * no "(" or no counter after its last one: the Python code then numbers the whole block (the
 * lines numbered here got the numbers it gives them too, in the same order). */
static PyObject *number_lines(PyObject *self, PyObject *args)
{
    PyObject *subjects, *posters, *tails, *read_tail, *file_numbers;
    if (!PyArg_ParseTuple(args, "O!O!O!OO", &PyList_Type, &subjects, &PyList_Type, &posters, &PyDict_Type, &tails,
                          &read_tail, &file_numbers))
        return NULL;
    Py_ssize_t lines = PyList_GET_SIZE(subjects);
    if (PyList_GET_SIZE(posters) != lines)
        Py_RETURN_NONE;
    PyObject *numbers = PyList_New(lines), *counters = PyList_New(lines);
    if (numbers == NULL || counters == NULL)
        goto error;
    /* The line before's key, as spans: a file's articles come one after another, so a line with
     * the same poster, text before its last "(" and text after its counter is in the same file,
     * without its key made and looked up (the same number the look-up would give). */
    const char *last_text = NULL;
    Py_ssize_t last_paren = -1;
    PyObject *last_poster = NULL, *last_after = NULL, *last_number = NULL;  /* borrowed */
    for (Py_ssize_t i = 0; i < lines; i++) {
        PyObject *subject = PyList_GET_ITEM(subjects, i);
        if (!PyBytes_Check(subject))
            goto fallback;
        const char *text = PyBytes_AS_STRING(subject);
        Py_ssize_t length = PyBytes_GET_SIZE(subject), paren = length - 1;
        while (paren >= 0 && text[paren] != '(')
            paren--;
        if (paren < 0)
            goto fallback;
        PyObject *tail = PyBytes_FromStringAndSize(text + paren + 1, length - paren - 1);
        if (tail == NULL)
            goto error;
        PyObject *counter = PyDict_GetItemWithError(tails, tail);  /* borrowed */
        if (counter != NULL) {
            Py_INCREF(counter);
        } else if (PyErr_Occurred()) {
            Py_DECREF(tail);
            goto error;
        } else {
            counter = PyObject_CallOneArg(read_tail, tail);
            if (counter == NULL || PyDict_SetItem(tails, tail, counter) < 0) {
                Py_XDECREF(counter);
                Py_DECREF(tail);
                goto error;
            }
        }
        Py_DECREF(tail);
        if (!PyTuple_Check(counter) || PyTuple_GET_SIZE(counter) != 3) {  /* False: no counter there */
            Py_DECREF(counter);
            goto fallback;
        }
        PyList_SET_ITEM(counters, i, counter);  /* the list's reference now */
        PyObject *poster = PyList_GET_ITEM(posters, i), *after = PyTuple_GET_ITEM(counter, 2);
        if (last_number != NULL && paren == last_paren && same_bytes(poster, last_poster)
                && same_bytes(after, last_after) && memcmp(text, last_text, paren) == 0) {
            PyList_SET_ITEM(numbers, i, Py_NewRef(last_number));
            continue;
        }
        PyObject *before = PyBytes_FromStringAndSize(text, paren);
        if (before == NULL)
            goto error;
        PyObject *key = PyTuple_Pack(3, poster, before, after);
        Py_DECREF(before);
        if (key == NULL)
            goto error;
        PyObject *number = PyObject_GetItem(file_numbers, key);  /* a defaultdict: numbers a new key */
        Py_DECREF(key);
        if (number == NULL)
            goto error;
        PyList_SET_ITEM(numbers, i, number);
        /* bytes keys only (the Python code's: then equal bytes are an equal key) */
        int plain = PyBytes_Check(poster) && PyBytes_Check(after);
        last_number = plain ? number : NULL;
        last_text = text, last_paren = paren, last_poster = poster, last_after = after;
    }
    PyObject *result = PyTuple_Pack(2, numbers, counters);
    Py_DECREF(numbers);
    Py_DECREF(counters);
    return result;
fallback:
    Py_DECREF(numbers);
    Py_DECREF(counters);
    Py_RETURN_NONE;
error:
    Py_XDECREF(numbers);
    Py_XDECREF(counters);
    return NULL;
}

/* add_to_files(numbers, sizes, dates, fragments, bytes, last_dates): edge.gather's loop adding a
 * block's lines to their files, line i to file numbers[i]:
 *     fragments[file] += 1; bytes[file] += sizes[i]; last_dates[file] = dates[i]
 * Gives True once done, or None, before changing anything, unless every argument is a list, the
 * lines' three columns of one length, the files' of one length, every file number an int among
 * them, every size, count and byte total an int and every date bytes: the Python loop then does
 * it (and raises what it raises). */
static PyObject *add_to_files(PyObject *self, PyObject *args)
{
    PyObject *numbers, *sizes, *dates, *fragments, *bytes, *last_dates;
    if (!PyArg_ParseTuple(args, "OOOOOO", &numbers, &sizes, &dates, &fragments, &bytes, &last_dates))
        return NULL;
    if (!PyList_CheckExact(numbers) || !PyList_CheckExact(sizes) || !PyList_CheckExact(dates)
            || !PyList_CheckExact(fragments) || !PyList_CheckExact(bytes) || !PyList_CheckExact(last_dates))
        Py_RETURN_NONE;
    Py_ssize_t lines = PyList_GET_SIZE(numbers), files = PyList_GET_SIZE(fragments);
    if (PyList_GET_SIZE(sizes) != lines || PyList_GET_SIZE(dates) != lines || PyList_GET_SIZE(bytes) != files
            || PyList_GET_SIZE(last_dates) != files)
        Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < lines; i++) {
        PyObject *number = PyList_GET_ITEM(numbers, i);
        if (!PyLong_CheckExact(number) || !PyLong_CheckExact(PyList_GET_ITEM(sizes, i)))
            Py_RETURN_NONE;
        Py_ssize_t file = PyLong_AsSsize_t(number);
        if (file < 0 || file >= files) {
            PyErr_Clear();  /* past Py_ssize_t: not a file either */
            Py_RETURN_NONE;
        }
        /* ints and bytes only, in and out: no Python code runs below (no __add__, no __del__),
         * so nothing else changes the lists meanwhile */
        if (!PyLong_CheckExact(PyList_GET_ITEM(fragments, file)) || !PyLong_CheckExact(PyList_GET_ITEM(bytes, file))
                || !PyBytes_CheckExact(PyList_GET_ITEM(last_dates, file)) || !PyBytes_CheckExact(PyList_GET_ITEM(dates, i)))
            Py_RETURN_NONE;
    }
    PyObject *one = PyLong_FromLong(1);
    if (one == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < lines; i++) {
        Py_ssize_t file = PyLong_AsSsize_t(PyList_GET_ITEM(numbers, i));
        PyObject *count = PyNumber_Add(PyList_GET_ITEM(fragments, file), one);
        if (count == NULL)
            goto error;
        PyList_SetItem(fragments, file, count);  /* takes count, lets the old value go */
        PyObject *total = PyNumber_Add(PyList_GET_ITEM(bytes, file), PyList_GET_ITEM(sizes, i));
        if (total == NULL)
            goto error;
        PyList_SetItem(bytes, file, total);
        PyList_SetItem(last_dates, file, Py_NewRef(PyList_GET_ITEM(dates, i)));
    }
    Py_DECREF(one);
    Py_RETURN_TRUE;
error:
    Py_DECREF(one);
    return NULL;
}

static PyMethodDef methods[] = {
    {"number_lines", number_lines, METH_VARARGS, "A block's lines numbered into files, or None."},
    {"clean_columns", clean_columns, METH_VARARGS, "A clean overview block's columns, or None."},
    {"dot_line", dot_line, METH_O, "Index of the first dot after an LF, or -1."},
    {"add_to_files", add_to_files, METH_VARARGS, "A block's lines added to their files, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_overview", "Overview blocks cut into columns, dot lines found, at C speed.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__overview(void)
{
    return PyModule_Create(&module);
}
