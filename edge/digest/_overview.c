/* The edge's per-line hot loops in C, each the twin of Python code beside it (same results):
 *
 *   clean_columns(data, subject, poster, date, message_id, size, min_fields, lowest, highest,
 *                 max_size, max_text, max_message_id)
 *       the fast path of edge.digest.overview.parse_block_in_order: a clean block of CRLF-terminated
 *       overview lines (no NUL, every line with as many fields as the first, the last field not
 *       one of those read, every number and size ASCII digits, every message-id non-empty,
 *       numbers in lowest..highest, sizes at most max_size, subjects and posters of at most
 *       max_text bytes, message-ids of at most max_message_id) as its columns:
 *       (numbers, subjects, posters, dates, message_ids, sizes, consecutive), numbers a range
 *       when they are consecutive (digit strings of one length, each one more than the last),
 *       else a list. Any other block gives None: the Python code then reads it line by line,
 *       counting its rejects.
 *   number_lines(subjects, posters, tails, read_tail, file_numbers)
 *       edge.digest.gather's numbering of a block's lines into files (see the function).
 *   dot_line(data)
 *       where the first line that starts with a dot starts in data (data starting at a line
 *       start; the index of that dot, after an LF), or -1: edge.digest.nntp's _DOT_AFTER_LF search.
 *   long_line(data, longest)
 *       where the first line of data longer than longest bytes (its CRLF not counted) starts, or
 *       -1: edge.digest.nntp's look for over-long lines in a reply, one memchr a line.
 *   add_to_files(numbers, sizes, dates, fragments, bytes, last_dates)
 *       edge.digest.gather's loop adding a block's lines to their files (see the function).
 *   file_rows(numbers, keys, subjects, first_dates, last_dates, counters, first_lines, rkey, poster,
 *             file_keys, parse_date, zoned_day_start)
 *       edge.digest.gather._file_rows: one kept release's file rows (their keys hashed by the
 *       caller, with hashlib), their dates read here when they end in " HH:MM:SS +ZZZZ"
 *       (edge.digest.overview.parse_date's fast path, its day look-up called).
 *   usual_subject(text, cut_suffixes, cuts)
 *       edge.digest.subjects.parse_pieces' shortcut for the most common shape, on ASCII text.
 *
 * Only bytes objects are read, which the callers make sure of. A block is read once, and the
 * objects made are the columns' own. An install builds it or stops (edge/setup.py); SEED_IMPL=python
 * runs the Python twins instead.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MAX_INT64_VALUE 9223372036854775807LL

/* Reads ASCII digits (at least one) as a value. Returns 0 on success, or -1 when they are not
 * digits or the value is past 2^63 - 1. */
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
            return -1;  /* past 2^63 - 1 (leading zeros are fine: the value stays 0) */
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
    Py_ssize_t max_text, max_message_id;
    if (!PyArg_ParseTuple(args, "O!nnnnnnLLLnn", &PyBytes_Type, &data, &subject, &poster, &date, &message_id,
                          &size_field, &min_fields, &lowest, &highest, &max_size, &max_text, &max_message_id))
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

    /* The first line's width is the number of its tabs, up to its CRLF. */
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
    /* While the numbers are consecutive they are first_number..previous; once they are not,
     * c.numbers is a list. */
    long long first_number = 0, previous = 0;
    Py_ssize_t number_length = -1, lines = 0;
    int consecutive = 1;

    const char *line = start, *end = start + length;
    /* The line before's poster: a file's articles come one after another, each with the same
     * From, so its object is used again (no copy, and its hash is computed once, for the
     * numbering's key) where the bytes are the same. */
    PyObject *last_poster = NULL;  /* borrowed, since c.posters holds it */
    /* The spans of one line's fields: the width can be large, so only the fields read are kept. */
    while (line < end) {
        const char *eol = memchr(line, '\n', end - line);
        if (eol == NULL || eol == line || eol[-1] != '\r')
            goto unclean;
        const char *field = line, *stop = eol - 1;  /* the last field ends at the CR */
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
            || lengths[3] == 0 || number < lowest || number > highest || size > max_size
            || lengths[0] > max_text || lengths[1] > max_text || lengths[3] > max_message_id)
            goto unclean;
        if (lines == 0) {
            first_number = number;
            number_length = number_len;
        } else {
            if (consecutive && (previous == MAX_INT64_VALUE || number != previous + 1 || number_len != number_length)) {
                /* The numbers so far were first_number..previous; from here on they are a list. */
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
        /* The range's stop may be 2^63, so it is passed unsigned. */
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

static PyObject *long_line(PyObject *self, PyObject *args)
{
    PyObject *data;
    Py_ssize_t longest;
    if (!PyArg_ParseTuple(args, "O!n", &PyBytes_Type, &data, &longest))
        return NULL;
    const char *start = PyBytes_AS_STRING(data), *end = start + PyBytes_GET_SIZE(data), *p = start;
    while (p < end) {
        const char *lf = memchr(p, '\n', end - p);
        const char *stop = lf ? lf : end;
        Py_ssize_t length = stop - p;
        if (lf != NULL && length > 0 && lf[-1] == '\r')
            length--;
        if (length > longest)
            return PyLong_FromSsize_t(p - start);
        if (lf == NULL)
            break;
        p = lf + 1;
    }
    return PyLong_FromLong(-1);
}

/* Whether two objects are bytes with the same contents (b is NULL or bytes). */
static inline int same_bytes(PyObject *a, PyObject *b)
{
    if (a == b)
        return b != NULL;
    return b != NULL && PyBytes_Check(a) && PyBytes_GET_SIZE(a) == PyBytes_GET_SIZE(b)
           && memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b)) == 0;
}

/* number_lines(subjects, posters, tails, read_tail, file_numbers): edge.digest.gather's numbering of a
 * block's lines into files. Each subject is cut at its last "(": the text after it is looked up in
 * tails (read_tail(text) read into it when missing), which gives (part, parts, text after the
 * counter) or False; the file is file_numbers[(poster, text before, text after the counter)] (a
 * defaultdict numbering new keys). Gives (file numbers, counters), or None as soon as a line has
 * no "(" or no counter after its last one: the Python code then numbers the whole block (the
 * lines numbered here got the numbers it gives them too, in the same order).
 *
 * read_tail and the defaultdict's factory are Python code, and so may be the keys' hashing and
 * comparison: any of them may change the subjects and posters lists, or let their items go. So
 * each line's subject and poster are held (owned references) while they are read, the lists'
 * sizes are read again for each line, and the line before's subject and poster, which the next
 * line is compared with, are held too. */
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
    /* The line before's key, as spans: a file's articles come one after another, so a line with
     * the same poster, text before its last "(" and text after its counter is in the same file,
     * without its key made and looked up (the same number the look-up would give). last_subject
     * and last_poster are owned; last_after and last_number are borrowed from the counters and
     * numbers lists, which are this function's own (no Python code sees them before it returns). */
    PyObject *subject = NULL, *poster = NULL, *last_subject = NULL, *last_poster = NULL;
    PyObject *last_after = NULL, *last_number = NULL;
    Py_ssize_t last_paren = -1;
    if (numbers == NULL || counters == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < lines; i++) {
        if (i >= PyList_GET_SIZE(subjects) || i >= PyList_GET_SIZE(posters))
            goto fallback;  /* the lists were changed meanwhile */
        Py_XSETREF(subject, Py_NewRef(PyList_GET_ITEM(subjects, i)));
        Py_XSETREF(poster, Py_NewRef(PyList_GET_ITEM(posters, i)));
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
        PyObject *counter = PyDict_GetItemWithError(tails, tail);  /* borrowed until the Py_INCREF */
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
        /* False means there is no counter after the last "(". */
        if (!PyTuple_Check(counter) || PyTuple_GET_SIZE(counter) != 3) {
            Py_DECREF(counter);
            goto fallback;
        }
        PyList_SET_ITEM(counters, i, counter);  /* the list now owns this reference */
        PyObject *after = PyTuple_GET_ITEM(counter, 2);  /* borrowed: the counter tuple holds it */
        if (last_number != NULL && paren == last_paren && same_bytes(poster, last_poster)
                && same_bytes(after, last_after) && memcmp(text, PyBytes_AS_STRING(last_subject), paren) == 0) {
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
        /* file_numbers is a defaultdict, which gives a new key the next number. */
        PyObject *number = PyObject_GetItem(file_numbers, key);
        Py_DECREF(key);
        if (number == NULL)
            goto error;
        PyList_SET_ITEM(numbers, i, number);
        /* The shortcut is kept only for bytes keys, as the Python code makes them: then equal
         * bytes are an equal key. */
        int plain = PyBytes_Check(poster) && PyBytes_Check(after);
        last_number = plain ? number : NULL;
        last_paren = paren, last_after = after;
        Py_XSETREF(last_subject, Py_NewRef(subject));
        Py_XSETREF(last_poster, Py_NewRef(poster));
    }
    PyObject *result = PyTuple_Pack(2, numbers, counters);
    Py_XDECREF(subject);
    Py_XDECREF(poster);
    Py_XDECREF(last_subject);
    Py_XDECREF(last_poster);
    Py_DECREF(numbers);
    Py_DECREF(counters);
    return result;
fallback:
    Py_XDECREF(subject);
    Py_XDECREF(poster);
    Py_XDECREF(last_subject);
    Py_XDECREF(last_poster);
    Py_DECREF(numbers);
    Py_DECREF(counters);
    Py_RETURN_NONE;
error:
    Py_XDECREF(subject);
    Py_XDECREF(poster);
    Py_XDECREF(last_subject);
    Py_XDECREF(last_poster);
    Py_XDECREF(numbers);
    Py_XDECREF(counters);
    return NULL;
}

/* add_to_files(numbers, sizes, dates, fragments, bytes, last_dates): edge.digest.gather's loop adding a
 * block's lines to their files, line i to file numbers[i]:
 *     fragments[file] += 1; bytes[file] += sizes[i]; last_dates[file] = dates[i]
 * It returns True once done. It returns None before changing anything unless every argument is a
 * list, the lines' three columns have one length, the files' three have one length, every file
 * number is an int among the files, every size, count and byte total is an int and every date is
 * bytes; the Python loop then does the work (and raises what it raises). */
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
            PyErr_Clear();  /* a number past Py_ssize_t is not a file either */
            Py_RETURN_NONE;
        }
        /* Only ints and bytes go in and come out, so no Python code runs below (no __add__, no
         * __del__) and nothing else changes the lists meanwhile. */
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
        PyList_SetItem(fragments, file, count);  /* takes count and lets the old value go */
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

static inline int is_digit(char c)
{
    return c >= '0' && c <= '9';
}


/* A date read for file_rows as a C integer in *value (0 for None, which stays unread). Returns 0
 * for anything but None or an int that fits, with no error set: file_rows then hands the release
 * back to its Python twin. */
static int date_as_value(PyObject *date, long long *value)
{
    if (date == Py_None)
        return 1;
    if (!PyLong_Check(date))
        return 0;
    *value = PyLong_AsLongLong(date);
    if (*value == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}
/* edge.digest.overview.parse_date(raw). A date ending in " HH:MM:SS +ZZZZ" (any two digits each)
 * is read here, its day's start given by zoned_day_start(raw[:-15], "+ZZZZ"), which caches it.
 * Anything else, or a day start that is None or far out, is read by parse_date itself. Returns a
 * new reference, or NULL on error. */
static PyObject *read_date(PyObject *raw, PyObject *parse_date, PyObject *zoned_day_start)
{
    if (!PyBytes_Check(raw) || PyBytes_GET_SIZE(raw) <= 15)
        return PyObject_CallOneArg(parse_date, raw);
    const char *p = PyBytes_AS_STRING(raw);
    Py_ssize_t n = PyBytes_GET_SIZE(raw);
    const char *c = p + n - 15;
    if (!(c[0] == ' ' && is_digit(c[1]) && is_digit(c[2]) && c[3] == ':' && is_digit(c[4]) && is_digit(c[5]) && c[6] == ':'
          && is_digit(c[7]) && is_digit(c[8]) && c[9] == ' ' && (c[10] == '+' || c[10] == '-')))
        return PyObject_CallOneArg(parse_date, raw);
    long long start;
    /* The day and zone of the date before, and its day's start, are kept because a release's files
     * are mostly posted on the same day. zoned_day_start always gives the same for the same day
     * and zone (only its cache may be emptied). These are read and written with the GIL held. */
    static char last_day[64 + 5];
    static Py_ssize_t last_day_length = -1;
    static long long last_start;
    static PyObject *last_function = NULL;  /* the zoned_day_start that gave it, held */
    Py_ssize_t day_length = n - 15;
    if (zoned_day_start == last_function && day_length + 5 <= (Py_ssize_t)sizeof last_day && day_length == last_day_length
            && memcmp(last_day, p, day_length) == 0 && memcmp(last_day + day_length, c + 10, 5) == 0) {
        start = last_start;
        goto add_clock;
    }
    PyObject *day_text = PyBytes_FromStringAndSize(p, n - 15);
    if (day_text == NULL)
        return NULL;
    PyObject *zone = PyBytes_FromStringAndSize(c + 10, 5);
    if (zone == NULL) {
        Py_DECREF(day_text);
        return NULL;
    }
    PyObject *day = PyObject_CallFunctionObjArgs(zoned_day_start, day_text, zone, NULL);
    Py_DECREF(day_text);
    Py_DECREF(zone);
    if (day == NULL)
        return NULL;
    int overflow = 0;
    start = PyLong_Check(day) ? PyLong_AsLongLongAndOverflow(day, &overflow) : 0;
    int usual = PyLong_Check(day) && !overflow && !(start == -1 && PyErr_Occurred())
                && start > -(1LL << 62) && start < (1LL << 62);
    Py_DECREF(day);
    PyErr_Clear();
    /* A day start that is None (parse_date then tries its other parser) or far out is left to
     * parse_date. */
    if (!usual)
        return PyObject_CallOneArg(parse_date, raw);
    if (day_length + 5 <= (Py_ssize_t)sizeof last_day) {
        memcpy(last_day, p, day_length);
        memcpy(last_day + day_length, c + 10, 5);
        last_day_length = day_length;
        last_start = start;
        Py_XSETREF(last_function, Py_NewRef(zoned_day_start));
    }
add_clock:;
    long long seconds = start + ((c[1] - '0') * 10 + (c[2] - '0')) * 3600LL + ((c[4] - '0') * 10 + (c[5] - '0')) * 60LL
                        + (c[7] - '0') * 10 + (c[8] - '0');
    if (seconds < 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(seconds);
}

/* file_rows(numbers, keys, subjects, first_dates, last_dates, counters, first_lines, rkey, poster,
 * file_keys, parse_date, zoned_day_start): edge.digest.gather._file_rows in C, with the same
 * result, for the files numbers[i] of one kept release, whose keys keys[i] the caller hashed. It
 * returns None when its arguments are not as the digest makes them (lists, _Subject tuples of
 * seven, keys and dates as ints or None...); the Python code then makes the rows, and the keys
 * already put in file_keys are the ones it puts there too. */
static PyObject *file_rows(PyObject *self, PyObject *args)
{
    PyObject *numbers, *keys, *subjects, *first_dates, *last_dates, *counters, *first_lines, *rkey, *poster,
        *file_keys, *parse_date, *zoned_day_start;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!O!OOO!OO", &PyList_Type, &numbers, &PyList_Type, &keys,
                          &PyList_Type, &subjects, &PyList_Type, &first_dates, &PyList_Type, &last_dates,
                          &PyList_Type, &counters, &PyList_Type, &first_lines, &rkey, &poster,
                          &PyList_Type, &file_keys, &parse_date, &zoned_day_start))
        return NULL;
    PyObject *result = NULL;
    PyObject *rows = PyDict_New();
    if (rows == NULL)
        return NULL;
    PyObject *earliest = NULL, *latest = NULL;  /* owned, or NULL while there is none yet */
    long long earliest_value = 0, latest_value = 0;
    Py_ssize_t bad_dates = 0;
    PyObject *date = NULL, *last_date = NULL, *key = NULL, *held_subject = NULL, *held_counter = NULL,
             *held_first = NULL, *held_last = NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(numbers); i++) {
        PyObject *number_object = PyList_GET_ITEM(numbers, i);
        if (!PyLong_CheckExact(number_object) || i >= PyList_GET_SIZE(keys)
                || !PyLong_CheckExact(PyList_GET_ITEM(keys, i)))
            goto fallback;
        Py_ssize_t number = PyLong_AsSsize_t(number_object);
        /* The sizes are read again for each file, because parse_date, below, may run any Python
         * code. */
        Py_ssize_t files = PyList_GET_SIZE(subjects);
        if (number < 0 || number >= files || PyList_GET_SIZE(first_dates) != files
                || PyList_GET_SIZE(last_dates) != files || PyList_GET_SIZE(first_lines) != files
                || PyList_GET_SIZE(file_keys) != files) {
            PyErr_Clear();
            goto fallback;
        }
        PyObject *subject_tuple = PyList_GET_ITEM(subjects, number);
        if (!PyTuple_CheckExact(subject_tuple) || PyTuple_GET_SIZE(subject_tuple) != 7)
            goto fallback;
        PyObject *parsed = PyTuple_GET_ITEM(subject_tuple, 0), *subject = PyTuple_GET_ITEM(subject_tuple, 5);
        /* A ParsedSubject is a tuple of its own type: a plain tuple would have no .filename for
         * the Python twin. */
        if (!PyTuple_Check(parsed) || PyTuple_CheckExact(parsed) || PyTuple_GET_SIZE(parsed) != 6)
            goto fallback;
        Py_ssize_t first_line = -1;
        PyObject *first_line_object = PyList_GET_ITEM(first_lines, number);
        if (PyLong_CheckExact(first_line_object))
            first_line = PyLong_AsSsize_t(first_line_object);
        if (first_line < 0 || first_line >= PyList_GET_SIZE(counters)) {
            PyErr_Clear();
            goto fallback;
        }
        PyObject *counter = PyList_GET_ITEM(counters, first_line);
        if (!PyTuple_Check(counter) || PyTuple_GET_SIZE(counter) < 2)
            goto fallback;
        PyObject *first_raw = PyList_GET_ITEM(first_dates, number), *last_raw = PyList_GET_ITEM(last_dates, number);
        if (!PyBytes_CheckExact(first_raw) || !PyBytes_CheckExact(last_raw))
            goto fallback;

        /* parse_date may run any Python code, and a value let go may run any __del__, so what
         * was read above is held until the row is made. The subject's tuple holds its items;
         * the lists are the digest's own, but a reference costs nothing. */
        held_subject = Py_NewRef(subject_tuple);
        held_counter = Py_NewRef(counter);
        held_first = Py_NewRef(first_raw);
        held_last = Py_NewRef(last_raw);
        key = Py_NewRef(PyList_GET_ITEM(keys, i));
        if (PyList_SetItem(file_keys, number, Py_NewRef(key)) < 0)
            goto error;
        date = read_date(first_raw, parse_date, zoned_day_start);
        if (date != NULL)
            last_date = same_bytes(last_raw, first_raw) ? Py_NewRef(date) : read_date(last_raw, parse_date, zoned_day_start);
        if (date == NULL || last_date == NULL)
            goto error;
        long long date_value = 0, last_value = 0;
        if (!date_as_value(date, &date_value) || !date_as_value(last_date, &last_value))
            goto fallback;
        if (date == Py_None) {
            bad_dates++;
        } else if (earliest == NULL || date_value < earliest_value) {
            Py_XSETREF(earliest, Py_NewRef(date));
            earliest_value = date_value;
        }
        if (last_date != Py_None && (latest == NULL || last_value > latest_value)) {
            Py_XSETREF(latest, Py_NewRef(last_date));
            latest_value = last_value;
        }
        PyObject *row = PyDict_GetItemWithError(rows, key);  /* borrowed */
        if (row == NULL && PyErr_Occurred())
            goto error;
        if (row == NULL) {
            row = PyList_New(10);
            if (row == NULL)
                goto error;
            PyObject *items[10] = {key, rkey, PyTuple_GET_ITEM(parsed, 0), subject, poster, date,
                                   PyTuple_GET_ITEM(parsed, 3), PyTuple_GET_ITEM(parsed, 4),
                                   PyTuple_GET_ITEM(counter, 1), last_date};
            for (int k = 0; k < 10; k++)
                PyList_SET_ITEM(row, k, Py_NewRef(items[k]));
            int failed = PyDict_SetItem(rows, key, row);
            Py_DECREF(row);
            if (failed < 0)
                goto error;
        } else {
            /* A file reposted under another subject shares the row, whose dates are widened
             * (_earliest, _latest). */
            if (!PyList_CheckExact(row) || PyList_GET_SIZE(row) != 10)
                goto fallback;
            PyObject *row_first = PyList_GET_ITEM(row, 5), *row_last = PyList_GET_ITEM(row, 9);
            if ((row_first != Py_None && !PyLong_Check(row_first)) || (row_last != Py_None && !PyLong_Check(row_last)))
                goto fallback;
            if (date != Py_None && (row_first == Py_None || date_value < PyLong_AsLongLong(row_first)))
                PyList_SetItem(row, 5, Py_NewRef(date));
            if (last_date != Py_None && (row_last == Py_None || last_value > PyLong_AsLongLong(row_last)))
                PyList_SetItem(row, 9, Py_NewRef(last_date));
        }
        Py_CLEAR(key);
        Py_CLEAR(date);
        Py_CLEAR(last_date);
        Py_CLEAR(held_subject);
        Py_CLEAR(held_counter);
        Py_CLEAR(held_first);
        Py_CLEAR(held_last);
    }
    PyObject *values = PyDict_Values(rows);
    Py_DECREF(rows);
    if (values == NULL) {
        Py_XDECREF(earliest);
        Py_XDECREF(latest);
        return NULL;
    }
    result = Py_BuildValue("(NOOn)", values, earliest ? earliest : Py_None, latest ? latest : Py_None, bad_dates);
    Py_XDECREF(earliest);
    Py_XDECREF(latest);
    return result;
fallback:
    result = Py_NewRef(Py_None);
error:  /* result is None when coming from the fallback, else NULL */
    Py_XDECREF(key);
    Py_XDECREF(date);
    Py_XDECREF(last_date);
    Py_XDECREF(held_subject);
    Py_XDECREF(held_counter);
    Py_XDECREF(held_first);
    Py_XDECREF(held_last);
    Py_DECREF(rows);
    Py_XDECREF(earliest);
    Py_XDECREF(latest);
    return result;
}

/* The chars edge.digest.subjects strips from the ends of the text around the counters (_EDGE_PUNCTUATION) */
static inline int edge_punctuation(char c)
{
    return c && strchr(" \t-:|~_.,;/\\<>", c) != NULL;
}

/* edge.digest.subjects.base_name(filename) for an ASCII str: up to three dot-suffixes are cut
 * while cut_suffixes (a dict of suffix -> bool) or cuts(suffix), which fills it, says so. Returns
 * a new reference, or NULL on error. */
static PyObject *base_name(PyObject *filename, PyObject *cut_suffixes, PyObject *cuts)
{
    const char *text = (const char *)PyUnicode_DATA(filename);
    Py_ssize_t end = PyUnicode_GET_LENGTH(filename);
    for (int round = 0; round < 3; round++) {
        Py_ssize_t dot = end - 1;
        while (dot >= 0 && text[dot] != '.')
            dot--;
        if (dot <= 0)  /* no dot, or nothing before it, so rpartition's head is empty */
            break;
        PyObject *suffix = PyUnicode_FromStringAndSize(text + dot + 1, end - dot - 1);
        if (suffix == NULL)
            return NULL;
        PyObject *cut = PyDict_GetItemWithError(cut_suffixes, suffix);  /* borrowed */
        if (cut != NULL && cut != Py_None) {  /* None counts as missing, as .get() reads it */
            Py_INCREF(cut);
        } else if (cut == NULL && PyErr_Occurred()) {
            Py_DECREF(suffix);
            return NULL;
        } else {
            cut = PyObject_CallOneArg(cuts, suffix);
            if (cut == NULL) {
                Py_DECREF(suffix);
                return NULL;
            }
        }
        Py_DECREF(suffix);
        int truth = PyObject_IsTrue(cut);
        Py_DECREF(cut);
        if (truth < 0)
            return NULL;
        if (!truth)
            break;
        end = dot;
    }
    if (end == PyUnicode_GET_LENGTH(filename))
        return Py_NewRef(filename);
    return PyUnicode_FromStringAndSize(text, end);
}

/* usual_subject(text, cut_suffixes, cuts): edge.digest.subjects.parse_pieces' shortcut, for the text it
 * has made (stripped, with the reply prefix and the text after the counter dealt with). For ASCII
 * text it returns (filename, file index, file count, release) where the shortcut gives those, and
 * False where it does not (the steps then read the text). For any other text it returns None,
 * and the Python shortcut decides. The shortcut's regex, [i/N] - "name" yEnc with maybe text in
 * front,
 *     (?:([^"\[\]]*+)(?<= ))?(?:\[(\d{1,6})/(\d{1,6})\] - )?"([^"]+)" yEnc    (fullmatch)
 * has at most one way to match, because its front repeat is possessive, so it is followed here
 * step by step. */
static PyObject *usual_subject(PyObject *self, PyObject *args)
{
    PyObject *text_object, *cut_suffixes, *cuts;
    if (!PyArg_ParseTuple(args, "UO!O", &text_object, &PyDict_Type, &cut_suffixes, &cuts))
        return NULL;
    if (!PyUnicode_IS_ASCII(text_object))
        Py_RETURN_NONE;
    const char *text = (const char *)PyUnicode_DATA(text_object);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text_object);
    static const char TAIL[] = "\" yEnc";
    const Py_ssize_t tail = sizeof TAIL - 1;
    if (n < tail || memcmp(text + n - tail, TAIL, tail) != 0)
        Py_RETURN_FALSE;
    /* The text in front is the longest run without " [ ], kept only when it ends with a space. */
    Py_ssize_t run = 0;
    while (run < n && text[run] != '"' && text[run] != '[' && text[run] != ']')
        run++;
    Py_ssize_t at = run > 0 && text[run - 1] == ' ' ? run : 0;
    Py_ssize_t around_length = at > 0 ? at - 1 : -1;  /* without its space, or -1 for no text in front */
    /* [i/N] - */
    Py_ssize_t index_at = -1, index_length = 0, count_at = -1, count_length = 0;
    if (at < n && text[at] == '[') {
        Py_ssize_t p = at + 1, digits = 0;
        while (p < n && is_digit(text[p]) && digits < 7)
            p++, digits++;
        if (digits >= 1 && digits <= 6 && p < n && text[p] == '/') {
            Py_ssize_t index_start = at + 1, index_digits = digits;
            p++;
            Py_ssize_t count_start = p;
            digits = 0;
            while (p < n && is_digit(text[p]) && digits < 7)
                p++, digits++;
            if (digits >= 1 && digits <= 6 && n - p >= 4 && memcmp(text + p, "] - ", 4) == 0) {
                index_at = index_start, index_length = index_digits;
                count_at = count_start, count_length = digits;
                at = p + 4;
            }
        }
    }
    /* "name" yEnc, to the end */
    if (at >= n || text[at] != '"')
        Py_RETURN_FALSE;
    Py_ssize_t close = at + 1;
    while (close < n && text[close] != '"')
        close++;
    if (close == at + 1 || close != n - tail)
        Py_RETURN_FALSE;
    /* The shortcut's condition: a file counter or nothing in front, and what is in front, if
     * anything, is only edge punctuation or the file name's base (and holds no "yEnc"). */
    if (index_at < 0 && around_length > 0)
        Py_RETURN_FALSE;
    PyObject *filename = PyUnicode_FromStringAndSize(text + at + 1, close - at - 1);
    if (filename == NULL)
        return NULL;
    PyObject *stem = base_name(filename, cut_suffixes, cuts);
    if (stem == NULL) {
        Py_DECREF(filename);
        return NULL;
    }
    if (around_length > 0) {
        const char *around = text;
        Py_ssize_t length = around_length;
        int has_yenc = 0;
        for (Py_ssize_t k = 0; k + 4 <= length; k++)
            if (memcmp(around + k, "yEnc", 4) == 0) {
                has_yenc = 1;
                break;
            }
        Py_ssize_t first = 0, last = length;
        while (first < last && edge_punctuation(around[first]))
            first++;
        while (last > first && edge_punctuation(around[last - 1]))
            last--;
        /* The stem is ASCII, being a part of the ASCII file name. */
        int same = last == first || (PyUnicode_GET_LENGTH(stem) == last - first
                                     && memcmp(PyUnicode_DATA(stem), around + first, last - first) == 0);
        if (has_yenc || !same) {
            Py_DECREF(filename);
            Py_DECREF(stem);
            Py_RETURN_FALSE;
        }
    }
    PyObject *file_index = Py_None, *file_count = Py_None;
    if (index_at >= 0) {
        long long value = 0;
        read_digits(text + index_at, index_length, &value);
        file_index = PyLong_FromLongLong(value);
        read_digits(text + count_at, count_length, &value);
        file_count = PyLong_FromLongLong(value);
        if (file_index == NULL || file_count == NULL) {
            Py_XDECREF(file_index);
            Py_XDECREF(file_count);
            Py_DECREF(filename);
            Py_DECREF(stem);
            return NULL;
        }
    } else {
        Py_INCREF(Py_None);
        Py_INCREF(Py_None);
    }
    return Py_BuildValue("(NNNN)", filename, file_index, file_count, stem);
}

/* The interface's version, the module's VERSION: edge.digest.compiled.VERSIONS holds the one the
 * Python code expects, and a build whose VERSION differs (made from other sources) is refused when
 * loaded. Raise both together with any change to what a function takes or gives. */
#define INTERFACE_VERSION 1

static PyMethodDef methods[] = {
    {"number_lines", number_lines, METH_VARARGS, "A block's lines numbered into files, or None."},
    {"clean_columns", clean_columns, METH_VARARGS, "A clean overview block's columns, or None."},
    {"dot_line", dot_line, METH_O, "Index of the first dot after an LF, or -1."},
    {"long_line", long_line, METH_VARARGS, "Index of the first line longer than the limit, or -1."},
    {"add_to_files", add_to_files, METH_VARARGS, "A block's lines added to their files, or None."},
    {"file_rows", file_rows, METH_VARARGS, "A kept release's file rows, or None."},
    {"usual_subject", usual_subject, METH_VARARGS, "parse_pieces' shortcut on ASCII text, False or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_overview", "Overview blocks cut into columns, dot lines found, at C speed.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__overview(void)
{
    PyObject *created = PyModule_Create(&module);
    if (created != NULL && PyModule_AddIntConstant(created, "VERSION", INTERFACE_VERSION) < 0)
        Py_CLEAR(created);
    return created;
}
