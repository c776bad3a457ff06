/* The op_summary / kernel_details row loop of doctor/probes/msprof.py, in C.
 *
 * Why: Python's csv reader is most of the time of a 10^6-row op_summary (1.1 s of 1.7 s);
 * this scanner reads the bytes once and sums per key without making a row object.
 *
 * Contract: for any input it either gives exactly what parse_op_rows gives on
 * csv.reader(io.TextIOWrapper(stream, "utf-8-sig", errors="replace", newline="")) --
 * the same rows (default dialect, strict=False), the same row count, the same bad-row
 * count, the same keys in the same first-seen order and the same float sums (added in row
 * order) -- or it raises Fallback, and the caller re-reads the file with the Python path.
 * Fallback covers what it does not emulate: a NUL byte (an error before Python 3.11), a
 * field longer than csv.field_size_limit() bytes, a header of more than MAX_HEADER fields.
 *
 * Hostile input: every index is checked against the buffer it reads; stored fields are
 * bounded by the field limit, so a record's scratch is at most keep * limit bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MAX_HEADER 4096
#define NEED_MORE (-1)
#define FALLBACK (-2)
#define FAILED (-3) /* a Python exception is set */

static PyObject *Fallback;

enum { START_RECORD, START_FIELD, IN_FIELD, IN_QUOTED, QUOTE_IN_QUOTED };

typedef struct {
    Py_ssize_t nfields;
    Py_ssize_t keep;            /* fields with index < keep are stored */
    Py_ssize_t *off, *len;      /* per stored field: offset (into buf or in), length */
    char *where;                /* per stored field: 1 if in buf (unescaped), 0 if in `in` */
    Py_ssize_t ncap;            /* capacity of off/len */
    char *buf;
    Py_ssize_t cap, used;
    Py_ssize_t limit;           /* csv.field_size_limit() */
    Py_ssize_t cur;             /* bytes in the field being read */
    Py_ssize_t start;           /* its offset (in buf or in) */
    int scratch;                /* the current field is copied to buf (it was unescaped) */
    const unsigned char *in;    /* the data being scanned: fields not unescaped point here */
} Rec;

static int rec_init(Rec *r, Py_ssize_t keep, Py_ssize_t limit) {
    memset(r, 0, sizeof(*r));
    r->keep = keep;
    r->limit = limit;
    r->ncap = keep < 64 ? (keep > 0 ? keep : 1) : 64;
    r->off = PyMem_New(Py_ssize_t, r->ncap);
    r->len = PyMem_New(Py_ssize_t, r->ncap);
    r->where = PyMem_New(char, r->ncap);
    r->cap = 4096;
    r->buf = PyMem_Malloc(r->cap);
    if (!r->off || !r->len || !r->where || !r->buf) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void rec_free(Rec *r) {
    PyMem_Free(r->off);
    PyMem_Free(r->len);
    PyMem_Free(r->buf);
    PyMem_Free(r->where);
    r->where = NULL;
    r->off = r->len = NULL;
    r->buf = NULL;
}

static int scratch_grow(Rec *r, Py_ssize_t n) {
    Py_ssize_t want = r->used + n;
    Py_ssize_t cap = r->cap;
    while (cap < want) {
        if (cap > PY_SSIZE_T_MAX / 2)
            return FALLBACK;
        cap *= 2;
    }
    char *b = PyMem_Realloc(r->buf, cap);
    if (!b) {
        PyErr_NoMemory();
        return FAILED;
    }
    r->buf = b;
    r->cap = cap;
    return 0;
}

/* Append n bytes (at s, inside r->in) to the current field; FALLBACK past the field limit.
 * A field that is one run of the input is not copied: it points into the input. */
static inline int rec_add(Rec *r, const unsigned char *s, Py_ssize_t n) {
    if (n > r->limit - r->cur)
        return FALLBACK;
    if (r->nfields >= r->keep) {
        r->cur += n;
        return 0;
    }
    if (!r->scratch) {
        Py_ssize_t at = s - r->in;
        if (r->cur == 0) {
            r->start = at;
            r->cur = n;
            return 0;
        }
        if (r->start + r->cur == at) {
            r->cur += n;
            return 0;
        }
        /* not adjacent (a doubled quote, text after the closing quote): copy what it has */
        if (r->cur > r->cap - r->used) {
            int rc = scratch_grow(r, r->cur);
            if (rc < 0) return rc;
        }
        memcpy(r->buf + r->used, r->in + r->start, r->cur);
        r->start = r->used;
        r->used += r->cur;
        r->scratch = 1;
    }
    if (n > r->cap - r->used) {
        int rc = scratch_grow(r, n);
        if (rc < 0) return rc;
    }
    memcpy(r->buf + r->used, s, n);
    r->used += n;
    r->cur += n;
    return 0;
}

static int rec_grow_fields(Rec *r) {
    Py_ssize_t ncap = r->ncap * 2;
    if (ncap > r->keep)
        ncap = r->keep;
    Py_ssize_t *o = PyMem_Resize(r->off, Py_ssize_t, ncap);
    if (!o) { PyErr_NoMemory(); return FAILED; }
    r->off = o;
    Py_ssize_t *l = PyMem_Resize(r->len, Py_ssize_t, ncap);
    if (!l) { PyErr_NoMemory(); return FAILED; }
    r->len = l;
    char *w = PyMem_Resize(r->where, char, ncap);
    if (!w) { PyErr_NoMemory(); return FAILED; }
    r->where = w;
    r->ncap = ncap;
    return 0;
}

static inline int rec_save(Rec *r) {
    if (r->nfields < r->keep) {
        if (r->nfields >= r->ncap) {
            int rc = rec_grow_fields(r);
            if (rc < 0) return rc;
        }
        r->off[r->nfields] = r->cur ? r->start : 0;
        r->len[r->nfields] = r->cur;
        r->where[r->nfields] = (char)r->scratch;
    }
    r->nfields++;
    r->cur = 0;
    r->scratch = 0;
    return 0;
}

/* Bytes that end an unquoted field, and those that end a quoted run. */
static unsigned char stop_plain[256], stop_quoted[256];

/* One record from p[pos:n]: its end (after the line ending), NEED_MORE, FALLBACK or FAILED.
 * At final, the data ends there (csv's end of input: a field being read is kept). */
static Py_ssize_t scan_record(Rec *r, const unsigned char *p, Py_ssize_t n, Py_ssize_t pos,
                              int final) {
    int state = START_RECORD, rc;
    Py_ssize_t i = pos;
    r->nfields = 0;
    r->used = 0;
    r->cur = 0;
    r->start = 0;
    r->scratch = 0;
    r->in = p;
    while (i < n) {
        unsigned char c = p[i];
        if (c == 0)
            return FALLBACK;
        switch (state) {
        case START_RECORD:
            if (c == '\n')
                return i + 1; /* an empty line: a row with no field */
            if (c == '\r')
                goto line_end;
            state = START_FIELD;
            continue;
        case START_FIELD:
            if (c == '"') {
                state = IN_QUOTED;
                i++;
                continue;
            }
            if (c == ',') {
                if ((rc = rec_save(r)) < 0) return rc;
                i++;
                continue;
            }
            if (c == '\n' || c == '\r') {
                if ((rc = rec_save(r)) < 0) return rc;
                goto line_end;
            }
            state = IN_FIELD;
            continue;
        case IN_FIELD: {
            Py_ssize_t j = i;
            while (j < n && !stop_plain[p[j]])
                j++;
            if ((rc = rec_add(r, p + i, j - i)) < 0) return rc;
            i = j;
            if (i >= n)
                continue;
            c = p[i];
            if (c == 0)
                return FALLBACK;
            if ((rc = rec_save(r)) < 0) return rc;
            if (c == ',') {
                state = START_FIELD;
                i++;
                continue;
            }
            goto line_end;
        }
        case IN_QUOTED: {
            Py_ssize_t j = i;
            while (j < n && !stop_quoted[p[j]])
                j++;
            if ((rc = rec_add(r, p + i, j - i)) < 0) return rc;
            i = j;
            if (i >= n)
                continue;
            if (p[i] == 0)
                return FALLBACK;
            state = QUOTE_IN_QUOTED; /* p[i] is the quote */
            i++;
            continue;
        }
        case QUOTE_IN_QUOTED:
            if (c == '"') { /* a doubled quote is one quote */
                if ((rc = rec_add(r, p + i, 1)) < 0) return rc;
                state = IN_QUOTED;
                i++;
                continue;
            }
            if (c == ',') {
                if ((rc = rec_save(r)) < 0) return rc;
                state = START_FIELD;
                i++;
                continue;
            }
            if (c == '\n' || c == '\r') {
                if ((rc = rec_save(r)) < 0) return rc;
                goto line_end;
            }
            /* strict=False: text after the closing quote joins the field */
            if ((rc = rec_add(r, p + i, 1)) < 0) return rc;
            state = IN_FIELD;
            i++;
            continue;
        }
    }
    /* the data ran out inside the record */
    if (!final)
        return NEED_MORE;
    if (state == START_RECORD)
        return n; /* nothing left: no record (the caller checks pos < n) */
    if ((rc = rec_save(r)) < 0) return rc;
    return n;

line_end: /* p[i] is '\n' or '\r'; "\r\n" is one line ending */
    if (p[i] == '\n')
        return i + 1;
    if (i + 1 < n)
        return i + (p[i + 1] == '\n' ? 2 : 1);
    return final ? i + 1 : NEED_MORE;
}

static inline const char *field_at(Rec *r, Py_ssize_t k) {
    return r->where[k] ? r->buf + r->off[k] : (const char *)r->in + r->off[k];
}

static PyObject *field_str(Rec *r, Py_ssize_t k) {
    return PyUnicode_DecodeUTF8(field_at(r, k), r->len[k], "replace");
}

static int field_is(Rec *r, Py_ssize_t k, const char *s, Py_ssize_t n) {
    return r->len[k] == n && memcmp(field_at(r, k), s, n) == 0;
}

/* ------------------------------------------------------------------ UTF-8 */

/* 1 when p[0..n) is UTF-8 as CPython's strict decoder accepts it (no overlong forms, no
 * surrogates, nothing past U+10FFFF, no sequence cut short), else 0.
 *
 * Why: the Python path decodes the whole stream (errors="replace") before csv sees a
 * quote, the scanner unescapes bytes first and decodes fields after. On valid UTF-8 the
 * two agree; on invalid bytes they can differ (two different invalid names that both
 * decode to U+FFFD are one key for Python and two here; a sequence split by a quote is
 * repaired here; a cut BOM). A record with invalid UTF-8 is left to the Python path. A
 * record ends at a newline, which no sequence holds, so records are checked one by one. */
static int utf8_valid(const unsigned char *p, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        while (i + 8 <= n) { /* ASCII runs a word at a time */
            unsigned long long w;
            memcpy(&w, p + i, 8);
            if (w & 0x8080808080808080ULL)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        unsigned char c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        Py_ssize_t len;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else
            return 0;
        if (n - i < len)
            return 0;
        if (p[i + 1] < lo || p[i + 1] > hi)
            return 0;
        for (Py_ssize_t k = 2; k < len; k++)
            if (p[i + k] < 0x80 || p[i + k] > 0xBF)
                return 0;
        i += len;
    }
    return 1;
}

/* ------------------------------------------------------------------ first_record */

static int skip_bom(const unsigned char *p, Py_ssize_t n, Py_ssize_t pos) {
    return pos == 0 && n >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF ? 3 : 0;
}

static PyObject *first_record(PyObject *self, PyObject *args) {
    Py_buffer view;
    int final;
    Py_ssize_t limit, n;
    if (!PyArg_ParseTuple(args, "y*npn", &view, &n, &final, &limit))
        return NULL;
    const unsigned char *p = view.buf;
    if (n < 0 || n > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "end outside the data");
        return NULL;
    }
    Py_ssize_t pos = skip_bom(p, n, 0);
    PyObject *out = NULL;
    Rec r;
    if (rec_init(&r, MAX_HEADER, limit) < 0)
        goto done;
    if (pos >= n && final) {
        out = Py_BuildValue("(On)", Py_None, n);
        goto done;
    }
    Py_ssize_t end = scan_record(&r, p, n, pos, final);
    if (end == FAILED)
        goto done;
    /* from byte 0: a BOM cut short is invalid UTF-8 too */
    if (end == FALLBACK || r.nfields > MAX_HEADER || (end > 0 && !utf8_valid(p, end))) {
        PyErr_SetString(Fallback, "header not handled here");
        goto done;
    }
    if (end == NEED_MORE) {
        out = Py_BuildValue("(On)", Py_None, (Py_ssize_t)-1);
        goto done;
    }
    PyObject *fields = PyList_New(r.nfields);
    if (!fields)
        goto done;
    for (Py_ssize_t k = 0; k < r.nfields; k++) {
        PyObject *s = field_str(&r, k);
        if (!s) {
            Py_DECREF(fields);
            goto done;
        }
        PyList_SET_ITEM(fields, k, s);
    }
    out = Py_BuildValue("(Nn)", fields, end);
done:
    rec_free(&r);
    PyBuffer_Release(&view);
    return out;
}

/* ------------------------------------------------------------------ Scanner */

/* Sums per key, keys in first-seen order: a dict from the key's bytes to its index. */
typedef struct {
    PyObject *index;  /* bytes -> int */
    PyObject *keys;   /* list of tuple[str, ...] */
    double *sum;
    Py_ssize_t *cnt;
    Py_ssize_t cap;
} Table;

static int table_init(Table *t) {
    t->index = PyDict_New();
    t->keys = PyList_New(0);
    t->sum = NULL;
    t->cnt = NULL;
    t->cap = 0;
    return t->index && t->keys ? 0 : -1;
}

static void table_free(Table *t) {
    Py_CLEAR(t->index);
    Py_CLEAR(t->keys);
    PyMem_Free(t->sum);
    PyMem_Free(t->cnt);
    t->sum = NULL;
    t->cnt = NULL;
}

typedef struct {
    PyObject_HEAD
    Py_ssize_t width, need, i_dur, i_name, i_step;
    Py_ssize_t cols[4];
    Py_ssize_t n, bad;
    Rec rec;
    int ready;
    char *kbuf;
    Py_ssize_t kcap;
    Table sums, memcpy, steps;
} Scanner;

/* The bytes of the fields ks[0..m) as one key: each field's length, then its bytes. */
static PyObject *key_bytes(Scanner *s, const Py_ssize_t *ks, int m) {
    Rec *r = &s->rec;
    Py_ssize_t want = 0;
    for (int j = 0; j < m; j++)
        want += (Py_ssize_t)sizeof(Py_ssize_t) + r->len[ks[j]];
    if (want > s->kcap) {
        char *b = PyMem_Realloc(s->kbuf, want);
        if (!b)
            return PyErr_NoMemory();
        s->kbuf = b;
        s->kcap = want;
    }
    char *w = s->kbuf;
    for (int j = 0; j < m; j++) {
        Py_ssize_t l = r->len[ks[j]];
        memcpy(w, &l, sizeof(l));
        w += sizeof(l);
        memcpy(w, field_at(r, ks[j]), l);
        w += l;
    }
    return PyBytes_FromStringAndSize(s->kbuf, want);
}

/* The index of the key made of fields ks (added, with its str tuple, when new); -1 on error. */
static Py_ssize_t table_slot(Scanner *s, Table *t, const Py_ssize_t *ks, int m) {
    PyObject *kb = key_bytes(s, ks, m);
    if (!kb)
        return -1;
    PyObject *v = PyDict_GetItemWithError(t->index, kb);
    if (v) {
        Py_DECREF(kb);
        return PyLong_AsSsize_t(v);
    }
    if (PyErr_Occurred()) {
        Py_DECREF(kb);
        return -1;
    }
    Py_ssize_t idx = PyList_GET_SIZE(t->keys);
    if (idx >= t->cap) {
        Py_ssize_t cap = t->cap ? t->cap * 2 : 64;
        double *sum = PyMem_Resize(t->sum, double, cap);
        if (!sum) { Py_DECREF(kb); PyErr_NoMemory(); return -1; }
        t->sum = sum;
        Py_ssize_t *cnt = PyMem_Resize(t->cnt, Py_ssize_t, cap);
        if (!cnt) { Py_DECREF(kb); PyErr_NoMemory(); return -1; }
        t->cnt = cnt;
        t->cap = cap;
    }
    PyObject *tup = PyTuple_New(m);
    if (!tup) { Py_DECREF(kb); return -1; }
    for (int j = 0; j < m; j++) {
        PyObject *f = field_str(&s->rec, ks[j]);
        if (!f) { Py_DECREF(tup); Py_DECREF(kb); return -1; }
        PyTuple_SET_ITEM(tup, j, f);
    }
    PyObject *iv = PyLong_FromSsize_t(idx);
    int bad = !iv || PyDict_SetItem(t->index, kb, iv) < 0 || PyList_Append(t->keys, tup) < 0;
    Py_XDECREF(iv);
    Py_DECREF(tup);
    Py_DECREF(kb);
    if (bad)
        return -1;
    t->sum[idx] = 0.0;
    t->cnt[idx] = 0;
    return idx;
}

/* float(field) as Python computes it; 1 parsed, 0 not a number (ValueError), -1 error. */
static int field_float(Rec *r, Py_ssize_t k, double *out) {
    const char *s = field_at(r, k);
    Py_ssize_t n = r->len[k];
    if (n > 0 && n < 64) {
        char tmp[64];
        int plain = 1;
        for (Py_ssize_t j = 0; j < n; j++) {
            char c = s[j];
            if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' ||
                  c == '-')) {
                plain = 0;
                break;
            }
        }
        if (plain) { /* the parser float() calls, on the same text */
            char *end;
            memcpy(tmp, s, n);
            tmp[n] = 0;
            double v = PyOS_string_to_double(tmp, &end, NULL);
            if (!PyErr_Occurred() && end == tmp + n) {
                *out = v;
                return 1;
            }
            PyErr_Clear();
        }
    }
    PyObject *str = field_str(r, k);
    if (!str)
        return -1;
    PyObject *f = PyFloat_FromString(str);
    Py_DECREF(str);
    if (f) {
        *out = PyFloat_AS_DOUBLE(f);
        Py_DECREF(f);
        return 1;
    }
    if (PyErr_ExceptionMatches(PyExc_ValueError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

static int row(Scanner *s) {
    Rec *r = &s->rec;
    s->n++;
    if (r->nfields != s->width) {
        if (r->nfields == 0)
            return 0;
        s->bad++; /* cut short or extra fields: used only if it reaches every column */
        if (r->nfields <= s->need)
            return 0;
    }
    double dur;
    int ok = field_float(r, s->i_dur, &dur);
    if (ok < 0)
        return -1;
    if (!ok) {
        if (!field_is(r, s->i_dur, "N/A", 3) && r->len[s->i_dur] != 0)
            s->bad++;
        return 0;
    }
    Py_ssize_t idx = table_slot(s, &s->sums, s->cols, 4);
    if (idx < 0)
        return -1;
    s->sums.sum[idx] += dur;
    s->sums.cnt[idx]++;
    if (field_is(r, s->cols[1], "MEMCPY_ASYNC", 12) || field_is(r, s->cols[2], "MEMCPY_ASYNC", 12)) {
        Py_ssize_t mk[3] = {s->cols[0], s->cols[3], s->i_name};
        Py_ssize_t m = table_slot(s, &s->memcpy, mk, 3);
        if (m < 0)
            return -1;
        s->memcpy.sum[m] += dur;
        s->memcpy.cnt[m]++;
    }
    if (s->i_step >= 0) {
        Py_ssize_t sk[2] = {s->cols[0], s->i_step};
        if (table_slot(s, &s->steps, sk, 2) < 0)
            return -1;
    }
    return 0;
}

static void Scanner_dealloc(Scanner *s) {
    if (s->ready) {
        rec_free(&s->rec);
        table_free(&s->sums);
        table_free(&s->memcpy);
        table_free(&s->steps);
    }
    PyMem_Free(s->kbuf);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static int Scanner_init(Scanner *s, PyObject *args, PyObject *kw) {
    static char *names[] = {"width", "need", "i_dur", "cols", "i_name", "i_step", "limit", NULL};
    Py_ssize_t limit;
    if (s->ready) {
        PyErr_SetString(PyExc_RuntimeError, "Scanner already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "nnn(nnnn)nnn", names, &s->width, &s->need,
                                     &s->i_dur, &s->cols[0], &s->cols[1], &s->cols[2],
                                     &s->cols[3], &s->i_name, &s->i_step, &limit))
        return -1;
    Py_ssize_t all[7] = {s->need, s->i_dur, s->cols[0], s->cols[1], s->cols[2], s->cols[3],
                         s->i_name};
    for (int j = 0; j < 7; j++)
        if (all[j] < 0 || all[j] > s->need || s->need >= MAX_HEADER) {
            PyErr_SetString(PyExc_ValueError, "column index out of range");
            return -1;
        }
    if (s->i_step > s->need || s->i_step < -1 || limit < 0) {
        PyErr_SetString(PyExc_ValueError, "column index out of range");
        return -1;
    }
    if (rec_init(&s->rec, s->need + 1, limit) < 0)
        return -1;
    if (table_init(&s->sums) < 0 || table_init(&s->memcpy) < 0 || table_init(&s->steps) < 0) {
        rec_free(&s->rec);
        table_free(&s->sums);
        table_free(&s->memcpy);
        table_free(&s->steps);
        return -1;
    }
    s->ready = 1;
    return 0;
}

/* feed(data, start, end, final) -> the offset up to which whole records were read. */
static PyObject *Scanner_feed(Scanner *s, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, n;
    int final;
    if (!s->ready) {
        PyErr_SetString(PyExc_RuntimeError, "Scanner not initialised");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*nnp", &view, &pos, &n, &final))
        return NULL;
    const unsigned char *p = view.buf;
    PyObject *out = NULL;
    if (n < 0 || n > view.len || pos < 0 || pos > n) {
        PyErr_SetString(PyExc_ValueError, "start outside the data");
        goto done;
    }
    while (pos < n) {
        Py_ssize_t end = scan_record(&s->rec, p, n, pos, final);
        if (end == NEED_MORE)
            break;
        if (end == FAILED)
            goto done;
        if (end == FALLBACK) {
            PyErr_SetString(Fallback, "input not handled here (NUL byte or a field over the "
                                      "csv field limit)");
            goto done;
        }
        if (end <= pos) { /* cannot happen: every record consumes a byte */
            PyErr_SetString(PyExc_RuntimeError, "scanner made no progress");
            goto done;
        }
        if (!utf8_valid(p + pos, end - pos)) {
            PyErr_SetString(Fallback, "invalid UTF-8 (decoded by the Python path)");
            goto done;
        }
        if (row(s) < 0)
            goto done;
        pos = end;
    }
    out = PyLong_FromSsize_t(pos);
done:
    PyBuffer_Release(&view);
    return out;
}

static PyObject *table_dict(Table *t) {
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(t->keys); i++) {
        PyObject *v = Py_BuildValue("[dn]", t->sum[i], t->cnt[i]);
        if (!v || PyDict_SetItem(d, PyList_GET_ITEM(t->keys, i), v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

/* result() -> (rows, bad rows, sums, memcpy, steps) as parse_op_rows builds them. */
static PyObject *Scanner_result(Scanner *s, PyObject *unused) {
    if (!s->ready) {
        PyErr_SetString(PyExc_RuntimeError, "Scanner not initialised");
        return NULL;
    }
    PyObject *sums = table_dict(&s->sums);
    PyObject *mem = sums ? table_dict(&s->memcpy) : NULL;
    PyObject *steps = mem ? PySet_New(s->steps.keys) : NULL;
    if (!steps) {
        Py_XDECREF(sums);
        Py_XDECREF(mem);
        return NULL;
    }
    return Py_BuildValue("(nnNNN)", s->n, s->bad, sums, mem, steps);
}

static PyMethodDef Scanner_methods[] = {
    {"feed", (PyCFunction)Scanner_feed, METH_VARARGS, "feed(data, start, end, final) -> offset"},
    {"result", (PyCFunction)Scanner_result, METH_NOARGS, "(rows, bad, sums, memcpy, steps)"},
    {NULL}};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ascend_doctor._opscan.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "op_summary rows summed per (device, task type, op type, stream)",
    .tp_methods = Scanner_methods,
    .tp_init = (initproc)Scanner_init,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef module_methods[] = {
    {"first_record", first_record, METH_VARARGS,
     "first_record(data, end, final, limit) -> (fields or None, record end or -1)"},
    {NULL}};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_opscan",
                                       "op_summary scanner (see _opscan.c)", -1,
                                       module_methods};

PyMODINIT_FUNC PyInit__opscan(void) {
    memset(stop_plain, 0, sizeof(stop_plain));
    memset(stop_quoted, 0, sizeof(stop_quoted));
    stop_plain[','] = stop_plain['\r'] = stop_plain['\n'] = stop_plain[0] = 1;
    stop_quoted['"'] = stop_quoted[0] = 1;
    if (PyType_Ready(&ScannerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    Fallback = PyErr_NewException("ascend_doctor._opscan.Fallback", PyExc_Exception, NULL);
    Py_XINCREF(Fallback);
    if (!Fallback || PyModule_AddObject(m, "Fallback", Fallback) < 0) {
        Py_XDECREF(Fallback);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&ScannerType);
    if (PyModule_AddObject(m, "Scanner", (PyObject *)&ScannerType) < 0) {
        Py_DECREF(&ScannerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
