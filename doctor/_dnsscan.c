/* The pcap / pcapng DNS analysis of doctor/probes/dnsstats.py, in C.
 *
 * Why: on a 10^6-packet capture the Python record walk (pcapread._pcap) and the analysis
 * state machine (dnsstats.Analyser.add/_query/_response/_sweep/_syn) are nearly all of
 * the time; this scanner does both in one pass over the raw bytes.
 *
 * What it emulates, exactly: pcapread.iter_packets over a classic pcap (the four magics,
 * every link type in SUPPORTED_LINKTYPES, VLAN tags, IPv4 options and fragments, IPv6
 * extension headers, UDP and TCP DNS, SYNs to the service ports) with make_filter's rules;
 * dnswire.parse_dns / parse_dns_tcp / read_name (names decoded ascii/replace and lowered,
 * kept as UTF-8 so that equal Python strings are equal byte strings here); Analyser.add and
 * its helpers with the same bounds (MAX_*), the same insertion orders (clients, names,
 * qtypes, targets, addr_names, pending with dict update-in-place semantics), the same
 * reservoir LCG and the same double arithmetic (the timestamp product goes through a
 * volatile so no compiler fuses it into an FMA). The record-level CaptureErrors
 * (truncated record header, corrupt record header, truncated packet record) are reported
 * with their offset and numbers; the caller builds the same exception text. At the end it
 * runs Analyser.result's final sweep itself, so the exported pending table is empty.
 *
 * pcapng (pcapread._pcapng): section headers in either byte order, interface description
 * blocks (link type, snap length, if_tsresol; at most MAX_IFACES per section), enhanced,
 * simple and obsolete packet blocks; other blocks are skipped.
 *
 * What it refuses (raises Fallback; the caller re-reads the stream from its start with the
 * Python path): a classic pcap without a whole global header or with an unsupported link
 * type, an unknown magic, short files; in pcapng every block the Python path reports as a
 * CaptureError (cut, corrupt, length mismatch) or reads otherwise (an unsupported link
 * type, too many interfaces), wherever it is in the file.
 *
 * Hostile input: every read is checked against the record (or message) it reads; names
 * are followed without recursion, at most 16 pointer hops and 255 bytes; every table is
 * capped by the Python bounds; hash tables use SipHash-1-3 with a per-scan random key so
 * crafted collisions cannot make lookups quadratic; every allocation is checked.
 * The GIL is held throughout (no Python call runs inside the record loop).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

/* the bounds of pcapread.py / dnswire.py / dnsstats.py (the tests compare them) */
#define MAX_CAPLEN (1 << 18)
#define MAX_ANSWERS 32
#define MAX_NAMES 1000
#define MAX_CLIENTS 4096
#define MAX_PENDING 200000
#define MAX_SAMPLES 20000
#define MAX_ADDR_NAMES 20000
#define NAMES_PER_ADDR 16
#define MAX_TARGETS 64
#define WINDOW_S 1.0
#define TIMEOUT_S 5.0
#define PAIR_S 0.5
#define MAX_IFACES 64 /* pcapng interfaces per section (more: the Python path reads it) */
#define NAME_BUF 1024 /* a name: <= 255 label bytes, each <= 3 bytes of UTF-8 */

static PyObject *Fallback;

/* -- SipHash-1-3 (keyed, so table probing stays linear-time on crafted keys) ---------- */
#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                          \
    do {                                                                  \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);         \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                            \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                            \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);         \
    } while (0)

static uint64_t shash(const uint64_t *k, const unsigned char *p, size_t n) {
    uint64_t v0 = k[0] ^ 0x736f6d6570736575ULL, v1 = k[1] ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k[0] ^ 0x6c7967656e657261ULL, v3 = k[1] ^ 0x7465646279746573ULL;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t m;
        memcpy(&m, p + i, 8);
        v3 ^= m; SIPROUND; v0 ^= m;
    }
    uint64_t b = (uint64_t)n << 56;
    for (size_t j = 0; i + j < n; j++)
        b |= (uint64_t)p[i + j] << (8 * j);
    v3 ^= b; SIPROUND; v0 ^= b;
    v2 ^= 0xff; SIPROUND; SIPROUND; SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* -- an insertion-ordered hash map with fixed-size keys (a Python dict's semantics) ----
 * Entries live in a log in insertion order; deleting marks the entry dead and leaves a
 * tombstone slot; when the log is full it is compacted (and grown if over half alive),
 * which renumbers entries -- only the pending table deletes, and nothing keeps its
 * entry numbers. Slots: 0 empty, 1 tombstone, else entry number + 2. The slot array is
 * twice the log's capacity, so a probe always meets an empty slot. */
typedef struct {
    uint32_t *slots;
    size_t mask;
    unsigned char *ents;
    size_t esize, ksize, voff;
    size_t len, cap, live, head; /* head: no live entry before it */
} OMap;

#define E_PTR(m, i) ((m)->ents + (size_t)(i) * (m)->esize)
#define E_HASH(m, i) (*(uint64_t *)E_PTR(m, i))
#define E_ALIVE(m, i) (*(uint32_t *)(E_PTR(m, i) + 8))
#define E_KEY(m, i) (E_PTR(m, i) + 16)
#define E_VAL(m, i) ((void *)(E_PTR(m, i) + (m)->voff))
#define OMAP_MAX_CAP ((size_t)1 << 28)

static int omap_init(OMap *m, size_t ksize, size_t vsize) {
    memset(m, 0, sizeof(*m));
    m->ksize = ksize;
    m->voff = 16 + ((ksize + 7) & ~(size_t)7);
    m->esize = m->voff + ((vsize + 7) & ~(size_t)7);
    m->cap = 16;
    m->mask = 31;
    m->ents = PyMem_Calloc(m->cap, m->esize);
    m->slots = PyMem_Calloc(m->mask + 1, sizeof(uint32_t));
    if (!m->ents || !m->slots) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void omap_free(OMap *m) {
    PyMem_Free(m->ents);
    PyMem_Free(m->slots);
    m->ents = NULL;
    m->slots = NULL;
}

static Py_ssize_t omap_find(const OMap *m, const void *key, uint64_t h) {
    size_t i = (size_t)h & m->mask;
    for (;;) {
        uint32_t s = m->slots[i];
        if (s == 0)
            return -1;
        if (s >= 2 && E_HASH(m, s - 2) == h && memcmp(E_KEY(m, s - 2), key, m->ksize) == 0)
            return (Py_ssize_t)(s - 2);
        i = (i + 1) & m->mask;
    }
}

static void omap_place(OMap *m, size_t e) {
    size_t i = (size_t)E_HASH(m, e) & m->mask;
    while (m->slots[i] >= 2)
        i = (i + 1) & m->mask;
    m->slots[i] = (uint32_t)(e + 2);
}

/* drop dead entries (keeping order), grow when more than half are alive, re-slot */
static int omap_rebuild(OMap *m) {
    size_t cap = m->cap, w = 0;
    for (size_t r = 0; r < m->len; r++) {
        if (!E_ALIVE(m, r))
            continue;
        if (w != r)
            memcpy(E_PTR(m, w), E_PTR(m, r), m->esize);
        w++;
    }
    m->len = m->live = w;
    m->head = 0;
    if (w > cap / 2) {
        if (cap >= OMAP_MAX_CAP) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
        unsigned char *ne = PyMem_Realloc(m->ents, cap * m->esize);
        if (!ne) {
            PyErr_NoMemory();
            return -1;
        }
        m->ents = ne;
        uint32_t *ns = PyMem_Calloc(cap * 2, sizeof(uint32_t));
        if (!ns) {
            PyErr_NoMemory();
            return -1;
        }
        PyMem_Free(m->slots);
        m->slots = ns;
        m->cap = cap;
        m->mask = cap * 2 - 1;
    } else {
        memset(m->slots, 0, (m->mask + 1) * sizeof(uint32_t));
    }
    for (size_t e = 0; e < m->len; e++)
        omap_place(m, e);
    return 0;
}

/* append a key known to be absent; returns its entry number, -1 on MemoryError */
static Py_ssize_t omap_insert(OMap *m, const void *key, uint64_t h) {
    if (m->len == m->cap && omap_rebuild(m) < 0)
        return -1;
    size_t e = m->len++;
    memset(E_PTR(m, e), 0, m->esize);
    E_HASH(m, e) = h;
    E_ALIVE(m, e) = 1;
    memcpy(E_KEY(m, e), key, m->ksize);
    omap_place(m, e);
    m->live++;
    return (Py_ssize_t)e;
}

static void omap_delete(OMap *m, size_t e) {
    size_t i = (size_t)E_HASH(m, e) & m->mask;
    while (m->slots[i] != e + 2)
        i = (i + 1) & m->mask;
    m->slots[i] = 1;
    E_ALIVE(m, e) = 0;
    m->live--;
}

/* -- interned name strings (variable length, never deleted) --------------------------- */
typedef struct {
    uint64_t hash;
    size_t off;
    uint32_t len;
} StrEnt;

typedef struct {
    uint32_t *slots; /* 0 empty, else id + 1 */
    size_t mask;
    StrEnt *ents;
    size_t n, cap;
    unsigned char *arena;
    size_t used, acap;
} StrTab;

static int strtab_init(StrTab *t) {
    memset(t, 0, sizeof(*t));
    t->cap = 64;
    t->mask = 127;
    t->acap = 4096;
    t->ents = PyMem_Calloc(t->cap, sizeof(StrEnt));
    t->slots = PyMem_Calloc(t->mask + 1, sizeof(uint32_t));
    t->arena = PyMem_Malloc(t->acap);
    if (!t->ents || !t->slots || !t->arena) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void strtab_free(StrTab *t) {
    PyMem_Free(t->ents);
    PyMem_Free(t->slots);
    PyMem_Free(t->arena);
    t->ents = NULL;
    t->slots = NULL;
    t->arena = NULL;
}

static Py_ssize_t strtab_find(const StrTab *t, const unsigned char *s, size_t n, uint64_t h) {
    size_t i = (size_t)h & t->mask;
    for (;;) {
        uint32_t v = t->slots[i];
        if (v == 0)
            return -1;
        const StrEnt *e = &t->ents[v - 1];
        if (e->hash == h && e->len == n && memcmp(t->arena + e->off, s, n) == 0)
            return (Py_ssize_t)(v - 1);
        i = (i + 1) & t->mask;
    }
}

/* add a string known to be absent; returns its id, -1 on MemoryError */
static Py_ssize_t strtab_add(StrTab *t, const unsigned char *s, size_t n, uint64_t h) {
    if (t->n == t->cap) {
        if (t->cap >= OMAP_MAX_CAP) {
            PyErr_NoMemory();
            return -1;
        }
        size_t cap = t->cap * 2;
        StrEnt *ne = PyMem_Realloc(t->ents, cap * sizeof(StrEnt));
        if (!ne) {
            PyErr_NoMemory();
            return -1;
        }
        t->ents = ne;
        uint32_t *ns = PyMem_Calloc(cap * 2, sizeof(uint32_t));
        if (!ns) {
            PyErr_NoMemory();
            return -1;
        }
        PyMem_Free(t->slots);
        t->slots = ns;
        t->cap = cap;
        t->mask = cap * 2 - 1;
        for (size_t id = 0; id < t->n; id++) {
            size_t i = (size_t)t->ents[id].hash & t->mask;
            while (t->slots[i])
                i = (i + 1) & t->mask;
            t->slots[i] = (uint32_t)(id + 1);
        }
    }
    if (t->acap - t->used < n) {
        size_t acap = t->acap;
        while (acap - t->used < n) {
            if (acap > ((size_t)1 << 40)) {
                PyErr_NoMemory();
                return -1;
            }
            acap *= 2;
        }
        unsigned char *na = PyMem_Realloc(t->arena, acap);
        if (!na) {
            PyErr_NoMemory();
            return -1;
        }
        t->arena = na;
        t->acap = acap;
    }
    size_t id = t->n++;
    t->ents[id].hash = h;
    t->ents[id].off = t->used;
    t->ents[id].len = (uint32_t)n;
    if (n)
        memcpy(t->arena + t->used, s, n);
    t->used += n;
    size_t i = (size_t)h & t->mask;
    while (t->slots[i])
        i = (i + 1) & t->mask;
    t->slots[i] = (uint32_t)(id + 1);
    return (Py_ssize_t)id;
}

/* -- the analysis state (dnsstats._Client / _Name and the Analyser's tables) ---------- */
typedef struct {
    unsigned char addr[17]; /* length byte + raw address */
    uint16_t port;
    int64_t n;
} Target;

typedef struct {
    unsigned char addr[17];
    int64_t queries, overflow, answered, nx, servfail, other, unanswered, seen_lat, pairs;
    int64_t syns, syns_after, sec, sec_count, peak, nnames;
    double last_any;
    /* one-entry lookup caches (entries of names/qtypes never move: those maps never
     * delete, so their entry numbers are stable); -1: empty */
    Py_ssize_t last_sid, last_ni, last_qe;
    int last_qtype;
    double *lat;
    size_t nlat, latcap;
    int ntargets;
    Target targets[MAX_TARGETS];
} Client;

typedef struct {
    int64_t queries, nx, servfail, answered;
    double last, last_a, last_aaaa;
} Name;

typedef struct {
    double ts;
    uint32_t client;
    int32_t name; /* -1: an overflow name (counted, not kept) */
} Pending;

typedef struct {
    uint32_t n;
    uint32_t ids[NAMES_PER_ADDR];
} AddrNames;

typedef struct {
    PyObject_HEAD
    int state; /* 0: global header not read, 1: records, 2: finished, 3: broken */
    int big;
    double unit;
    uint32_t linktype; /* classic pcap: the file's; pcapng: the current packet's interface */
    int ng;            /* pcapng: blocks instead of records */
    size_t nifaces;    /* pcapng: interfaces of the current section */
    uint32_t if_lt[MAX_IFACES], if_snap[MAX_IFACES];
    double if_unit[MAX_IFACES];
    size_t nlts;       /* pcapng: every interface link type seen (CaptureStats.linktypes) */
    uint32_t lts[MAX_IFACES];
    int any_port;
    unsigned char ports[8192]; /* bit p: port p is a service port */
    uint64_t key[2];
    int64_t consumed; /* absolute offset of the next feed's first byte */
    int64_t records, kept, bytes;
    int err_kind; /* 0 none, 1 truncated header, 2 corrupt header, 3 truncated record */
    int64_t err_off, err_a, err_b;
    /* Analyser */
    int have_first;
    double first, last, next_sweep;
    int64_t dns_messages, malformed, syns, dropped_clients;
    uint64_t rng;
    Client *clients;
    size_t nclients, ccap;
    OMap client_map; /* addr[17] -> uint32 client number (= entry number) */
    OMap names;      /* (client, string id) -> Name */
    OMap qtypes;     /* (client, qtype) -> int64 count */
    OMap pending;    /* 40-byte key -> Pending */
    OMap addr_names; /* addr[17] -> AddrNames */
    StrTab strs;
    /* one-entry lookup caches in front of the tables that never delete; -1: empty */
    Py_ssize_t last_ci, last_str, last_ae;
    unsigned char last_ck[17];
} Scanner;

/* a kept packet, as pcapread.Packet */
typedef struct {
    int kind; /* 0 UDP DNS, 1 TCP DNS, 2 SYN */
    const unsigned char *src, *dst, *payload;
    int alen;
    int sport, dport;
    Py_ssize_t plen;
} Pkt;

/* a parsed message, as dnswire.DnsMessage (qname as UTF-8, answers as pointers) */
typedef struct {
    unsigned id;
    int is_resp, rcode, qtype, nans;
    size_t qlen;
    unsigned char qname[NAME_BUF];
    const unsigned char *ans[MAX_ANSWERS];
    int anslen[MAX_ANSWERS];
} Msg;

static inline unsigned be16(const unsigned char *p) { return ((unsigned)p[0] << 8) | p[1]; }

static inline uint32_t rd32(const unsigned char *p, int big) {
    return big ? ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]
               : ((uint32_t)p[3] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[1] << 8) | p[0];
}

/* -- make_filter ---------------------------------------------------------------------- */
static int l3(const Scanner *s, const unsigned char *f, Py_ssize_t n, Py_ssize_t off,
              unsigned et, Pkt *p) {
    Py_ssize_t end;
    unsigned proto;
    if (et == 0x0800) {
        if (n < off + 20)
            return -1;
        unsigned vihl = f[off];
        if (vihl >> 4 != 4)
            return -1;
        Py_ssize_t ihl = (vihl & 15) * 4;
        if (ihl < 20 || (f[off + 6] & 0x1F) || f[off + 7]) /* a non-first fragment */
            return -1;
        proto = f[off + 9];
        p->src = f + off + 12;
        p->dst = f + off + 16;
        p->alen = 4;
        Py_ssize_t total = be16(f + off + 2);
        end = total >= ihl ? (n < off + total ? n : off + total) : n;
        off += ihl;
    } else if (et == 0x86DD) {
        if (n < off + 40)
            return -1;
        proto = f[off + 6];
        p->src = f + off + 8;
        p->dst = f + off + 24;
        p->alen = 16;
        Py_ssize_t e = off + 40 + be16(f + off + 4);
        end = n < e ? n : e;
        off += 40;
        for (int hops = 0; (proto == 0 || proto == 43 || proto == 60) && hops < 4 && n >= off + 8;
             hops++) {
            proto = f[off];
            off += (f[off + 1] + 1) * 8;
        }
    } else {
        return -1;
    }
    if (proto == 17) {
        if (end < off + 8)
            return -1;
        p->sport = be16(f + off);
        p->dport = be16(f + off + 2);
        if (p->sport == 53 || p->dport == 53) {
            p->payload = f + off + 8;
            p->plen = end - (off + 8);
            return p->kind = 0;
        }
        return -1;
    }
    if (proto == 6) {
        if (end < off + 20)
            return -1;
        p->sport = be16(f + off);
        p->dport = be16(f + off + 2);
        unsigned flags = f[off + 13];
        if (p->sport == 53 || p->dport == 53) {
            Py_ssize_t d = off + (f[off + 12] >> 4) * 4;
            if (end - d > 2) {
                p->payload = f + d;
                p->plen = end - d;
                return p->kind = 1;
            }
            return -1;
        }
        if ((flags & 0x12) == 0x02 &&
            (s->any_port || (s->ports[p->dport >> 3] >> (p->dport & 7)) & 1)) {
            p->payload = NULL;
            p->plen = 0;
            return p->kind = 2;
        }
    }
    return -1;
}

static int dispatch(const Scanner *s, const unsigned char *f, Py_ssize_t n, Pkt *p) {
    switch (s->linktype) {
    case 1: { /* Ethernet, VLAN tags */
        if (n < 14)
            return -1;
        unsigned et = be16(f + 12);
        Py_ssize_t off = 14;
        while ((et == 0x8100 || et == 0x88A8) && n >= off + 4) {
            et = be16(f + off + 2);
            off += 4;
        }
        return l3(s, f, n, off, et, p);
    }
    case 113: /* Linux cooked */
        return n >= 16 ? l3(s, f, n, 16, be16(f + 14), p) : -1;
    case 276: /* Linux cooked v2 */
        return n >= 20 ? l3(s, f, n, 20, be16(f), p) : -1;
    case 0:
    case 108: { /* BSD loopback: address family in host (NULL) or network (LOOP) order */
        if (n < 4)
            return -1;
        uint32_t af = s->linktype == 108 ? rd32(f, 1) : rd32(f, 0);
        if (af > 0xFFFF)
            af = rd32(f, 1);
        if (af == 2)
            return l3(s, f, n, 4, 0x0800, p);
        if (af == 10 || af == 24 || af == 28 || af == 30)
            return l3(s, f, n, 4, 0x86DD, p);
        return -1;
    }
    default: { /* raw IP: 101, 228, 229, 12, 14 */
        if (n < 1)
            return -1;
        unsigned v = f[0] >> 4;
        return l3(s, f, n, 0, v == 4 ? 0x0800 : v == 6 ? 0x86DD : 0, p);
    }
    }
}

/* -- dnswire ---------------------------------------------------------------------------- */
/* read_name: 0 and *after, or -1 (DnsFormatError). With out, the name as Python spells it
 * (ascii/replace: a byte >= 0x80 is U+FFFD; lower(): only A-Z change), in UTF-8. */
static int read_name(const unsigned char *m, Py_ssize_t n, Py_ssize_t off, unsigned char *out,
                     size_t *olen, Py_ssize_t *after) {
    Py_ssize_t end = -1;
    int hops = 0, total = 0;
    size_t o = 0;
    for (;;) {
        if (off >= n)
            return -1;
        unsigned ln = m[off];
        if (ln == 0) {
            off += 1;
            break;
        }
        if ((ln & 0xC0) == 0xC0) {
            if (off + 1 >= n)
                return -1;
            if (end < 0)
                end = off + 2;
            if (++hops > 16)
                return -1;
            off = (Py_ssize_t)(((ln & 0x3F) << 8) | m[off + 1]);
            continue;
        }
        if (ln & 0xC0)
            return -1;
        if (off + 1 + (Py_ssize_t)ln > n)
            return -1;
        total += (int)ln + 1;
        if (total > 255) /* Python checks after decoding the label: the same error */
            return -1;
        if (out) { /* o + 1 + 3 * ln <= 3 * total <= 765 < NAME_BUF */
            if (o)
                out[o++] = '.';
            for (unsigned j = 0; j < ln; j++) {
                unsigned char b = m[off + 1 + j];
                if (b >= 0x80) {
                    out[o++] = 0xEF;
                    out[o++] = 0xBF;
                    out[o++] = 0xBD;
                } else {
                    out[o++] = (b >= 'A' && b <= 'Z') ? (unsigned char)(b + 32) : b;
                }
            }
        }
        off += 1 + ln;
    }
    if (olen)
        *olen = o;
    *after = end >= 0 ? end : off;
    return 0;
}

/* parse_dns: 0, or -1 for a DnsFormatError */
static int parse_dns(const unsigned char *m, Py_ssize_t n, Msg *out) {
    if (n < 12)
        return -1;
    unsigned flags = be16(m + 2), qd = be16(m + 4), an = be16(m + 6);
    if (flags & 0x7800) /* opcode other than QUERY */
        return -1;
    out->id = be16(m);
    out->qlen = 0;
    out->qtype = 0;
    out->nans = 0;
    Py_ssize_t off = 12;
    if (qd) {
        if (qd > 4)
            return -1;
        if (read_name(m, n, off, out->qname, &out->qlen, &off) < 0)
            return -1;
        if (off + 4 > n)
            return -1;
        out->qtype = (int)be16(m + off);
        off += 4;
        for (unsigned i = 1; i < qd; i++) {
            if (read_name(m, n, off, NULL, NULL, &off) < 0)
                return -1;
            off += 4;
        }
    }
    out->is_resp = (flags & 0x8000) != 0;
    out->rcode = (int)(flags & 0xF);
    if (out->is_resp && an) {
        unsigned lim = an < MAX_ANSWERS ? an : MAX_ANSWERS;
        for (unsigned i = 0; i < lim; i++) {
            if (read_name(m, n, off, NULL, NULL, &off) < 0)
                return -1;
            if (off + 10 > n)
                break; /* answers cut by a snap length */
            unsigned rtype = be16(m + off), rdlen = be16(m + off + 8);
            off += 10;
            if (off + (Py_ssize_t)rdlen > n)
                break;
            if ((rtype == 1 && rdlen == 4) || (rtype == 28 && rdlen == 16)) {
                out->ans[out->nans] = m + off;
                out->anslen[out->nans++] = (int)rdlen;
            }
            off += rdlen;
        }
    }
    return 0;
}

/* -- Analyser ------------------------------------------------------------------------- */
static void addr_key(unsigned char *k, const unsigned char *a, int alen) {
    memset(k, 0, 17);
    k[0] = (unsigned char)alen;
    memcpy(k + 1, a, (size_t)alen);
}

/* Analyser._client: the client number, -1 when the table is full, -2 on MemoryError */
static Py_ssize_t get_client(Scanner *s, const unsigned char *a, int alen) {
    unsigned char k[17];
    addr_key(k, a, alen);
    if (s->last_ci >= 0 && !memcmp(s->last_ck, k, 17))
        return s->last_ci;
    uint64_t h = shash(s->key, k, 17);
    Py_ssize_t e = omap_find(&s->client_map, k, h);
    if (e >= 0) {
        s->last_ci = e;
        memcpy(s->last_ck, k, 17);
        return e;
    }
    if (s->nclients >= MAX_CLIENTS) {
        s->dropped_clients++;
        return -1;
    }
    if (s->nclients == s->ccap) {
        size_t cap = s->ccap ? s->ccap * 2 : 16;
        Client *nc = PyMem_Realloc(s->clients, cap * sizeof(Client));
        if (!nc) {
            PyErr_NoMemory();
            return -2;
        }
        s->clients = nc;
        s->ccap = cap;
    }
    e = omap_insert(&s->client_map, k, h);
    if (e < 0)
        return -2;
    Client *c = &s->clients[s->nclients++]; /* entry number == client number: no deletes */
    memset(c, 0, sizeof(*c));
    memcpy(c->addr, k, 17);
    c->last_any = -1e18;
    c->sec = -1;
    c->last_sid = c->last_ni = c->last_qe = -1;
    s->last_ci = e;
    memcpy(s->last_ck, k, 17);
    return e;
}

static Py_ssize_t find_name(Scanner *s, uint32_t ci, Py_ssize_t sid) {
    if (sid < 0)
        return -1;
    Client *c = &s->clients[ci];
    if (c->last_sid == sid)
        return c->last_ni;
    uint32_t k[2] = {ci, (uint32_t)sid};
    Py_ssize_t ni = omap_find(&s->names, k, shash(s->key, (const unsigned char *)k, 8));
    if (ni >= 0) {
        c->last_sid = sid;
        c->last_ni = ni;
    }
    return ni;
}

/* the id of an interned string, or -1 (then *h is its hash); one-entry cache in front */
static Py_ssize_t str_lookup(Scanner *s, const unsigned char *str, size_t n, uint64_t *h) {
    StrTab *t = &s->strs;
    if (s->last_str >= 0 && t->ents[s->last_str].len == n &&
        !memcmp(t->arena + t->ents[s->last_str].off, str, n))
        return s->last_str;
    *h = shash(s->key, str, n);
    Py_ssize_t id = strtab_find(t, str, n, *h);
    if (id >= 0)
        s->last_str = id;
    return id;
}

/* the addr_names entry of an address, or -1 (then *h is its key's hash) */
static Py_ssize_t addr_lookup(Scanner *s, const unsigned char *k, uint64_t *h) {
    if (s->last_ae >= 0 && !memcmp(E_KEY(&s->addr_names, s->last_ae), k, 17))
        return s->last_ae;
    *h = shash(s->key, k, 17);
    Py_ssize_t e = omap_find(&s->addr_names, k, *h);
    if (e >= 0)
        s->last_ae = e;
    return e;
}

static void sweep(Scanner *s, double now) {
    double cutoff = now - TIMEOUT_S;
    OMap *m = &s->pending;
    size_t i = m->head;
    for (; i < m->len; i++) {
        if (!E_ALIVE(m, i))
            continue;
        Pending *v = E_VAL(m, i);
        if (v->ts >= cutoff)
            break;
        s->clients[v->client].unanswered++;
        omap_delete(m, i);
    }
    m->head = i;
    s->next_sweep = now + 1.0;
}

static void pending_key(unsigned char *k, const unsigned char *a, int sport,
                        const unsigned char *b, int alen, int kind, unsigned mid) {
    memset(k, 0, 40);
    k[0] = (unsigned char)alen;
    k[1] = (unsigned char)kind;
    k[2] = (unsigned char)(sport >> 8);
    k[3] = (unsigned char)sport;
    k[4] = (unsigned char)(mid >> 8);
    k[5] = (unsigned char)mid;
    memcpy(k + 8, a, (size_t)alen);
    memcpy(k + 24, b, (size_t)alen);
}

static int query(Scanner *s, uint32_t ci, const Pkt *p, const Msg *m, unsigned mid, double ts) {
    Client *c = &s->clients[ci];
    c->queries++;
    Py_ssize_t e = c->last_qe;
    if (e < 0 || c->last_qtype != m->qtype) {
        uint32_t qk[2] = {ci, (uint32_t)m->qtype};
        uint64_t h = shash(s->key, (const unsigned char *)qk, 8);
        e = omap_find(&s->qtypes, qk, h);
        if (e < 0 && (e = omap_insert(&s->qtypes, qk, h)) < 0)
            return -1;
        c->last_qe = e;
        c->last_qtype = m->qtype;
    }
    (*(int64_t *)E_VAL(&s->qtypes, e))++;
    int64_t sec = (int64_t)ts; /* int(ts): ts is finite, >= 0 and < 2^33 */
    if (sec != c->sec) {
        c->sec = sec;
        c->sec_count = 0;
    }
    c->sec_count++;
    if (c->sec_count > c->peak)
        c->peak = c->sec_count;
    uint64_t sh = 0;
    Py_ssize_t sid = str_lookup(s, m->qname, m->qlen, &sh);
    Py_ssize_t ni = find_name(s, ci, sid);
    if (ni < 0) {
        if (c->nnames >= MAX_NAMES) {
            c->overflow++; /* counted, not kept: a fresh _Name never pairs */
        } else {
            if (sid < 0 && (sid = strtab_add(&s->strs, m->qname, m->qlen, sh)) < 0)
                return -1;
            s->last_str = sid;
            uint32_t nk[2] = {ci, (uint32_t)sid};
            ni = omap_insert(&s->names, nk, shash(s->key, (const unsigned char *)nk, 8));
            if (ni < 0)
                return -1;
            Name *nm = E_VAL(&s->names, ni);
            nm->last = nm->last_a = nm->last_aaaa = -1e18;
            c->nnames++;
        }
    }
    if (ni >= 0) {
        Name *nm = E_VAL(&s->names, ni);
        nm->queries++;
        if (m->qtype == 1) {
            if (ts - nm->last_aaaa <= PAIR_S) {
                c->pairs++;
                nm->last_aaaa = -1e18;
            } else {
                nm->last_a = ts;
            }
        } else if (m->qtype == 28) {
            if (ts - nm->last_a <= PAIR_S) {
                c->pairs++;
                nm->last_a = -1e18;
            } else {
                nm->last_aaaa = ts;
            }
        }
        nm->last = ts;
    }
    c->last_any = ts;
    if (s->pending.live < MAX_PENDING) {
        unsigned char k[40];
        pending_key(k, p->src, p->sport, p->dst, p->alen, p->kind, mid);
        uint64_t ph = shash(s->key, k, 40);
        Py_ssize_t pe = omap_find(&s->pending, k, ph); /* a dict update keeps its place */
        if (pe < 0 && (pe = omap_insert(&s->pending, k, ph)) < 0)
            return -1;
        Pending *v = E_VAL(&s->pending, pe);
        v->ts = ts;
        v->client = ci;
        v->name = (int32_t)ni;
    } else {
        c->unanswered++;
    }
    return 0;
}

static int response(Scanner *s, uint32_t ci, Py_ssize_t ni, int rcode, double latency) {
    Client *c = &s->clients[ci];
    Name *nm = ni >= 0 ? E_VAL(&s->names, ni) : NULL;
    if (rcode == 0) {
        c->answered++;
        if (nm)
            nm->answered++;
    } else if (rcode == 3) {
        c->nx++;
        if (nm)
            nm->nx++;
    } else if (rcode == 2) {
        c->servfail++;
        if (nm)
            nm->servfail++;
    } else {
        c->other++;
    }
    double ms = (0.0 > latency ? 0.0 : latency) * 1000.0; /* max(latency, 0.0) * 1000.0 */
    c->seen_lat++;
    if (c->nlat < MAX_SAMPLES) {
        if (c->nlat == c->latcap) {
            size_t cap = c->latcap ? c->latcap * 2 : 64;
            if (cap > MAX_SAMPLES)
                cap = MAX_SAMPLES;
            double *nl = PyMem_Realloc(c->lat, cap * sizeof(double));
            if (!nl) {
                PyErr_NoMemory();
                return -1;
            }
            c->lat = nl;
            c->latcap = cap;
        }
        c->lat[c->nlat++] = ms;
    } else { /* the reservoir, with the Analyser's LCG shared by all clients */
        s->rng = (s->rng * 1103515245u + 12345u) & 0x7FFFFFFFu;
        uint64_t j = s->rng % (uint64_t)c->seen_lat;
        if (j < MAX_SAMPLES)
            c->lat[j] = ms;
    }
    return 0;
}

static int add_answers(Scanner *s, const Msg *m) {
    uint64_t sh = 0;
    Py_ssize_t sid = -2; /* not looked up yet */
    for (int i = 0; i < m->nans; i++) {
        unsigned char k[17];
        addr_key(k, m->ans[i], m->anslen[i]);
        uint64_t h = 0;
        Py_ssize_t e = addr_lookup(s, k, &h);
        if (e < 0) {
            if (s->addr_names.live >= MAX_ADDR_NAMES)
                continue;
            if ((e = omap_insert(&s->addr_names, k, h)) < 0)
                return -1;
            s->last_ae = e;
        }
        AddrNames *an = E_VAL(&s->addr_names, e);
        if (an->n >= NAMES_PER_ADDR)
            continue;
        if (sid == -2)
            sid = str_lookup(s, m->qname, m->qlen, &sh);
        if (sid < 0) {
            if ((sid = strtab_add(&s->strs, m->qname, m->qlen, sh)) < 0)
                return -1;
            s->last_str = sid;
        }
        uint32_t j = 0;
        while (j < an->n && an->ids[j] != (uint32_t)sid)
            j++;
        if (j == an->n)
            an->ids[an->n++] = (uint32_t)sid;
    }
    return 0;
}

static int syn(Scanner *s, const Pkt *p, double ts) {
    Py_ssize_t ci = get_client(s, p->src, p->alen);
    if (ci == -2)
        return -1;
    if (ci < 0)
        return 0;
    Client *c = &s->clients[ci];
    s->syns++;
    c->syns++;
    unsigned char k[17];
    addr_key(k, p->dst, p->alen);
    int t = 0;
    while (t < c->ntargets && !(c->targets[t].port == p->dport && !memcmp(c->targets[t].addr, k, 17)))
        t++;
    if (t < c->ntargets) {
        c->targets[t].n++;
    } else if (c->ntargets < MAX_TARGETS) {
        memcpy(c->targets[t].addr, k, 17);
        c->targets[t].port = (uint16_t)p->dport;
        c->targets[t].n = 1;
        c->ntargets++;
    }
    uint64_t ah;
    Py_ssize_t e = addr_lookup(s, k, &ah);
    double since = ts - WINDOW_S;
    int hit = 0;
    if (e >= 0 && ((AddrNames *)E_VAL(&s->addr_names, e))->n) {
        AddrNames *an = E_VAL(&s->addr_names, e);
        for (uint32_t j = 0; j < an->n && !hit; j++) {
            Py_ssize_t ni = find_name(s, (uint32_t)ci, (Py_ssize_t)an->ids[j]);
            hit = ni >= 0 && ((Name *)E_VAL(&s->names, ni))->last >= since;
        }
    } else {
        hit = c->last_any >= since;
    }
    if (hit)
        c->syns_after++;
    return 0;
}

/* Analyser.add */
static int add(Scanner *s, const Pkt *p, double ts) {
    if (!s->have_first) {
        s->have_first = 1;
        s->first = ts;
    }
    s->last = ts;
    if (p->kind == 2)
        return syn(s, p, ts);
    Msg m;
    int bad;
    if (p->kind == 1) { /* parse_dns_tcp; the filter keeps segments of > 2 bytes */
        Py_ssize_t ln = be16(p->payload);
        bad = p->plen - 2 < ln || parse_dns(p->payload + 2, ln, &m) < 0;
    } else {
        bad = parse_dns(p->payload, p->plen, &m) < 0;
    }
    if (bad) {
        s->malformed++;
        return 0;
    }
    s->dns_messages++;
    if (ts >= s->next_sweep)
        sweep(s, ts);
    if (!m.is_resp) {
        if (p->dport != 53)
            return 0;
        Py_ssize_t ci = get_client(s, p->src, p->alen);
        if (ci == -2)
            return -1;
        if (ci < 0)
            return 0;
        return query(s, (uint32_t)ci, p, &m, m.id, ts);
    }
    if (p->sport != 53)
        return 0;
    unsigned char k[40];
    pending_key(k, p->dst, p->dport, p->src, p->alen, p->kind, m.id);
    Py_ssize_t e = omap_find(&s->pending, k, shash(s->key, k, 40));
    if (e < 0)
        return 0; /* the query came before the capture started */
    Pending v = *(Pending *)E_VAL(&s->pending, e);
    omap_delete(&s->pending, (size_t)e);
    if (response(s, v.client, v.name, m.rcode, ts - v.ts) < 0)
        return -1;
    if (m.nans && m.qlen)
        return add_answers(s, &m);
    return 0;
}

/* -- the record loop -------------------------------------------------------------------- */
static int header(Scanner *s, const unsigned char *b, Py_ssize_t have, int final) {
    /* 1: read (24 bytes used), 0: need more, -1: Fallback raised */
    if (have >= 4 && !memcmp(b, "\x0a\x0d\x0d\x0a", 4)) {
        s->ng = 1; /* pcapng: the section header is the first block */
        return 1;
    }
    if (have >= 4) {
        if (!memcmp(b, "\xd4\xc3\xb2\xa1", 4) || !memcmp(b, "\x4d\x3c\xb2\xa1", 4))
            s->big = 0;
        else if (!memcmp(b, "\xa1\xb2\xc3\xd4", 4) || !memcmp(b, "\xa1\xb2\x3c\x4d", 4))
            s->big = 1;
        else
            goto refuse;
    }
    if (have < 24)
        return final ? (PyErr_SetString(Fallback, "short capture"), -1) : 0;
    s->unit = b[s->big ? 3 : 0] == 0x4d ? 1e-9 : 1e-6; /* the nanosecond magics */
    s->linktype = rd32(b + 20, s->big) & 0x0FFFFFFF;
    switch (s->linktype) {
    case 0: case 1: case 101: case 108: case 113: case 228: case 229: case 276: case 12: case 14:
        return 1;
    }
refuse:
    PyErr_SetString(Fallback, "not a classic pcap with a supported link type");
    return -1;
}

static void fail(Scanner *s, int kind, int64_t off, int64_t a, int64_t b) {
    s->err_kind = kind;
    s->err_off = off;
    s->err_a = a;
    s->err_b = b;
}

static void finish(Scanner *s, int64_t bytes) {
    s->bytes = bytes;
    if (s->have_first)
        sweep(s, s->last); /* Analyser.result's sweep */
    s->state = 2;
}

/* -- pcapng (pcapread._pcapng) ----------------------------------------------------------- */
static int refuse_ng(const char *why) {
    PyErr_SetString(Fallback, why);
    return -1;
}

/* IDB option if_tsresol (code 9): 10^-v, or 2^-v with the high bit; else 1e-6 (_tsresol) */
static double tsresol(const unsigned char *o, Py_ssize_t n, int big) {
    Py_ssize_t i = 0;
    while (i + 4 <= n) {
        unsigned code = big ? be16(o + i) : (unsigned)(o[i] | (o[i + 1] << 8));
        unsigned len = big ? be16(o + i + 2) : (unsigned)(o[i + 2] | (o[i + 3] << 8));
        if (code == 0)
            break;
        if (code == 9 && len >= 1 && i + 5 <= n) {
            unsigned v = o[i + 4];
            /* Python's float ** float is C pow on the same doubles */
            return v & 0x80 ? pow(2.0, -(double)(v & 0x7F)) : pow(10.0, -(double)v);
        }
        i += 4 + (((Py_ssize_t)len + 3) & ~(Py_ssize_t)3);
    }
    return 1e-6;
}

static int supported(uint32_t lt) {
    switch (lt) {
    case 0: case 1: case 101: case 108: case 113: case 228: case 229: case 276: case 12: case 14:
        return 1;
    }
    return 0;
}

/* one packet of interface i (its frame f of n bytes) at ts */
static int ng_packet(Scanner *s, size_t i, const unsigned char *f, Py_ssize_t n, double ts) {
    s->records++;
    s->linktype = s->if_lt[i];
    Pkt p;
    if (dispatch(s, f, n, &p) < 0)
        return 0;
    s->kept++;
    return add(s, &p, ts);
}

/* The blocks from *pos: 0 (stopped for more bytes, or finished), -1 (an exception is set:
 * Fallback for anything the Python path reports as a CaptureError or reads otherwise --
 * a cut or corrupt block, an unknown link type, too many interfaces -- so it re-reads). */
static int ng_blocks(Scanner *s, const unsigned char *b, Py_ssize_t have, int final,
                     Py_ssize_t *pos) {
    for (;;) {
        Py_ssize_t left = have - *pos;
        int64_t at = s->consumed + *pos;
        if (left < 12) {
            if (!final)
                return 0;
            if (left)
                return refuse_ng("truncated pcapng block header");
            finish(s, at);
            return 0;
        }
        const unsigned char *r = b + *pos;
        if (!memcmp(r, "\x0a\x0d\x0d\x0a", 4)) { /* section header: byte order, new ifaces */
            if (!memcmp(r + 8, "\x4d\x3c\x2b\x1a", 4))
                s->big = 0;
            else if (!memcmp(r + 8, "\x1a\x2b\x3c\x4d", 4))
                s->big = 1;
            else
                return refuse_ng("bad pcapng byte-order magic");
            s->nifaces = 0;
        }
        uint32_t btype = rd32(r, s->big), blen = rd32(r + 4, s->big);
        if (blen < 12 || blen % 4 || blen > MAX_CAPLEN + 4096)
            return refuse_ng("corrupt pcapng block length");
        if (left < (Py_ssize_t)blen) {
            if (!final)
                return 0;
            return refuse_ng("truncated pcapng block");
        }
        if (rd32(r + blen - 4, s->big) != blen)
            return refuse_ng("pcapng block length mismatch");
        const unsigned char *body = r + 8;
        Py_ssize_t blen_body = (Py_ssize_t)blen - 12;
        *pos += blen;
        if (btype == 6) { /* enhanced packet block */
            if (blen_body < 20)
                return refuse_ng("short enhanced packet block");
            uint32_t ifid = rd32(body, s->big), caplen = rd32(body + 12, s->big);
            if (caplen > (uint32_t)(blen_body - 20) || ifid >= s->nifaces)
                return refuse_ng("corrupt enhanced packet block");
            uint64_t t = ((uint64_t)rd32(body + 4, s->big) << 32) | rd32(body + 8, s->big);
            volatile double ts = (double)t * s->if_unit[ifid]; /* as Python: int * float */
            if (ng_packet(s, ifid, body + 20, (Py_ssize_t)caplen, ts) < 0)
                return -1;
        } else if (btype == 3) { /* simple packet block: interface 0, no timestamp */
            if (!s->nifaces || blen_body < 4)
                return refuse_ng("simple packet block before any interface");
            uint32_t orig = rd32(body, s->big), snap = s->if_snap[0];
            uint32_t caplen = orig;
            if (snap && snap < caplen)
                caplen = snap;
            if ((uint32_t)(blen_body - 4) < caplen)
                caplen = (uint32_t)(blen_body - 4);
            if (ng_packet(s, 0, body + 4, (Py_ssize_t)caplen, 0.0) < 0)
                return -1;
        } else if (btype == 2) { /* obsolete packet block */
            if (blen_body < 20)
                return refuse_ng("short packet block");
            unsigned ifid = s->big ? be16(body) : (unsigned)(body[0] | (body[1] << 8));
            uint32_t caplen = rd32(body + 12, s->big);
            if (ifid >= s->nifaces || caplen > (uint32_t)(blen_body - 20))
                return refuse_ng("corrupt packet block");
            uint64_t t = ((uint64_t)rd32(body + 4, s->big) << 32) | rd32(body + 8, s->big);
            volatile double ts = (double)t * s->if_unit[ifid];
            if (ng_packet(s, ifid, body + 20, (Py_ssize_t)caplen, ts) < 0)
                return -1;
        } else if (btype == 1) { /* interface description block */
            if (blen_body < 8)
                return refuse_ng("short interface description block");
            uint32_t lt = s->big ? be16(body) : (uint32_t)(body[0] | (body[1] << 8));
            if (!supported(lt) || s->nifaces >= MAX_IFACES)
                return refuse_ng("pcapng interface the scanner leaves to Python");
            size_t k = 0;
            while (k < s->nlts && s->lts[k] != lt)
                k++;
            if (k == s->nlts) {
                if (s->nlts >= MAX_IFACES)
                    return refuse_ng("too many pcapng link types");
                s->lts[s->nlts++] = lt;
            }
            s->if_lt[s->nifaces] = lt;
            s->if_snap[s->nifaces] = rd32(body + 4, s->big);
            s->if_unit[s->nifaces] = tsresol(body + 8, blen_body - 8, s->big);
            s->nifaces++;
        } /* other blocks (name resolution, statistics, custom) are skipped */
    }
}

/* feed(buffer, have, final) -> bytes used (keep the rest), or -1 once finished */
static PyObject *Scanner_feed(Scanner *s, PyObject *args) {
    Py_buffer view;
    Py_ssize_t have;
    int final;
    if (!PyArg_ParseTuple(args, "y*np", &view, &have, &final))
        return NULL;
    PyObject *ret = NULL;
    const unsigned char *b = view.buf;
    Py_ssize_t pos = 0;
    if (have < 0 || have > view.len) {
        PyErr_SetString(PyExc_ValueError, "have out of range");
        goto out;
    }
    if (!s->names.ents || s->state >= 2) {
        PyErr_SetString(PyExc_RuntimeError, "scanner not initialised, or finished");
        goto out;
    }
    if (s->state == 0) {
        int r = header(s, b, have, final);
        if (r < 0)
            goto out;
        if (r == 0) {
            ret = PyLong_FromSsize_t(0);
            goto out;
        }
        s->state = 1;
        pos = s->ng ? 0 : 24;
    }
    if (s->ng) {
        if (ng_blocks(s, b, have, final, &pos) < 0) {
            s->state = 3;
            goto out;
        }
    } else for (;;) {
        Py_ssize_t left = have - pos;
        int64_t at = s->consumed + pos;
        if (left < 16) {
            if (!final)
                break;
            if (left)
                fail(s, 1, at, s->records, 0);
            finish(s, at);
            break;
        }
        const unsigned char *r = b + pos;
        uint32_t caplen = rd32(r + 8, s->big), origlen = rd32(r + 12, s->big);
        if (caplen > MAX_CAPLEN || caplen > origlen) {
            fail(s, 2, at, caplen, origlen < MAX_CAPLEN ? origlen : MAX_CAPLEN);
            finish(s, at);
            break;
        }
        if (left - 16 < (Py_ssize_t)caplen) {
            if (!final)
                break;
            fail(s, 3, at, caplen, left - 16);
            finish(s, at);
            break;
        }
        s->records++;
        pos += 16 + (Py_ssize_t)caplen;
        Pkt p;
        if (dispatch(s, r + 16, (Py_ssize_t)caplen, &p) < 0)
            continue;
        s->kept++;
        volatile double frac = (double)rd32(r + 4, s->big) * s->unit; /* no FMA: as Python */
        double ts = (double)rd32(r, s->big) + frac;
        if (add(s, &p, ts) < 0) {
            s->state = 3;
            goto out;
        }
    }
    if (s->state == 2) {
        ret = PyLong_FromLong(-1);
    } else {
        s->consumed += pos;
        ret = PyLong_FromSsize_t(pos);
    }
out:
    PyBuffer_Release(&view);
    return ret;
}

/* -- export ----------------------------------------------------------------------------- */
static PyObject *addr_bytes(const unsigned char *k) {
    return PyBytes_FromStringAndSize((const char *)k + 1, k[0]);
}

static PyObject *str_of(Scanner *s, PyObject **cache, uint32_t id) {
    if (!cache[id]) {
        const StrEnt *e = &s->strs.ents[id];
        cache[id] = PyUnicode_DecodeUTF8((const char *)s->strs.arena + e->off, e->len, "strict");
        if (!cache[id])
            return NULL;
    }
    Py_INCREF(cache[id]);
    return cache[id];
}

/* append (name, value...) built by fmt to lists[index] */
static int append_to(PyObject *lists, size_t i, PyObject *item) {
    if (!item)
        return -1;
    int r = PyList_Append(PyList_GET_ITEM(lists, i), item);
    Py_DECREF(item);
    return r;
}

static PyObject *Scanner_result(Scanner *s, PyObject *noargs) {
    (void)noargs;
    if (!s->names.ents || s->state != 2) {
        PyErr_SetString(PyExc_RuntimeError, "scan not finished");
        return NULL;
    }
    PyObject *out = NULL, *clients = NULL, *names = NULL, *qtypes = NULL, *addrs = NULL;
    PyObject *err = NULL, **cache = NULL;
    size_t nc = s->nclients;
    cache = PyMem_Calloc(s->strs.n ? s->strs.n : 1, sizeof(PyObject *));
    names = PyList_New((Py_ssize_t)nc);
    qtypes = PyList_New((Py_ssize_t)nc);
    clients = PyList_New(0);
    addrs = PyList_New(0);
    if (!cache || !names || !qtypes || !clients || !addrs) {
        if (!cache)
            PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < nc; i++) {
        PyObject *a = PyList_New(0), *b = PyList_New(0);
        if (!a || !b) {
            Py_XDECREF(a);
            Py_XDECREF(b);
            goto done;
        }
        PyList_SET_ITEM(names, (Py_ssize_t)i, a);
        PyList_SET_ITEM(qtypes, (Py_ssize_t)i, b);
    }
    for (size_t e = 0; e < s->names.len; e++) { /* global insertion order: per client too */
        const uint32_t *k = (const uint32_t *)E_KEY(&s->names, e);
        const Name *nm = E_VAL(&s->names, e);
        PyObject *str = str_of(s, cache, k[1]);
        if (!str || append_to(names, k[0], Py_BuildValue("(NLLLLddd)", str, (long long)nm->queries,
                                                          (long long)nm->nx, (long long)nm->servfail,
                                                          (long long)nm->answered, nm->last,
                                                          nm->last_a, nm->last_aaaa)) < 0)
            goto done;
    }
    for (size_t e = 0; e < s->qtypes.len; e++) {
        const uint32_t *k = (const uint32_t *)E_KEY(&s->qtypes, e);
        if (append_to(qtypes, k[0], Py_BuildValue("(IL)", k[1],
                                                  (long long)*(int64_t *)E_VAL(&s->qtypes, e))) < 0)
            goto done;
    }
    for (size_t i = 0; i < nc; i++) {
        Client *c = &s->clients[i];
        PyObject *lat = PyList_New((Py_ssize_t)c->nlat), *tg = PyList_New(0);
        if (!lat || !tg) {
            Py_XDECREF(lat);
            Py_XDECREF(tg);
            goto done;
        }
        for (size_t j = 0; j < c->nlat; j++) {
            PyObject *f = PyFloat_FromDouble(c->lat[j]);
            if (!f) {
                Py_DECREF(lat);
                Py_DECREF(tg);
                goto done;
            }
            PyList_SET_ITEM(lat, (Py_ssize_t)j, f);
        }
        for (int t = 0; t < c->ntargets; t++) {
            PyObject *it = Py_BuildValue("(NiL)", addr_bytes(c->targets[t].addr),
                                         (int)c->targets[t].port, (long long)c->targets[t].n);
            if (!it || PyList_Append(tg, it) < 0) {
                Py_XDECREF(it);
                Py_DECREF(lat);
                Py_DECREF(tg);
                goto done;
            }
            Py_DECREF(it);
        }
        PyObject *row = Py_BuildValue(
            "(N{s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:d,s:L,s:L,s:L,s:L,s:L}OONO)",
            addr_bytes(c->addr), "queries", (long long)c->queries, "overflow",
            (long long)c->overflow, "answered", (long long)c->answered, "nx", (long long)c->nx,
            "servfail", (long long)c->servfail, "other", (long long)c->other, "unanswered",
            (long long)c->unanswered, "seen_lat", (long long)c->seen_lat, "pairs",
            (long long)c->pairs, "last_any", c->last_any, "syns", (long long)c->syns, "syns_after",
            (long long)c->syns_after, "sec", (long long)c->sec, "sec_count",
            (long long)c->sec_count, "peak", (long long)c->peak, PyList_GET_ITEM(qtypes, i), lat,
            tg, PyList_GET_ITEM(names, i));
        Py_DECREF(lat);
        if (!row || PyList_Append(clients, row) < 0) {
            Py_XDECREF(row);
            goto done;
        }
        Py_DECREF(row);
    }
    for (size_t e = 0; e < s->addr_names.len; e++) {
        const AddrNames *an = E_VAL(&s->addr_names, e);
        PyObject *ns = PyList_New(an->n);
        if (!ns)
            goto done;
        for (uint32_t j = 0; j < an->n; j++) {
            PyObject *str = str_of(s, cache, an->ids[j]);
            if (!str) {
                Py_DECREF(ns);
                goto done;
            }
            PyList_SET_ITEM(ns, j, str);
        }
        PyObject *it = Py_BuildValue("(NN)", addr_bytes(E_KEY(&s->addr_names, e)), ns);
        if (!it || PyList_Append(addrs, it) < 0) {
            Py_XDECREF(it);
            goto done;
        }
        Py_DECREF(it);
    }
    if (s->err_kind) {
        err = Py_BuildValue("(iLLL)", s->err_kind, (long long)s->err_off, (long long)s->err_a,
                            (long long)s->err_b);
    } else {
        err = Py_None;
        Py_INCREF(err);
    }
    if (!err)
        goto done;
    PyObject *first = s->have_first ? PyFloat_FromDouble(s->first) : (Py_INCREF(Py_None), Py_None);
    PyObject *last = s->have_first ? PyFloat_FromDouble(s->last) : (Py_INCREF(Py_None), Py_None);
    out = Py_BuildValue("{s:L,s:L,s:L,s:I,s:O,s:N,s:N,s:L,s:L,s:L,s:L,s:K,s:d,s:O,s:O}",
                        "records", (long long)s->records, "kept", (long long)s->kept, "bytes",
                        (long long)s->bytes, "linktype", s->linktype, "error", err, "first", first,
                        "last", last, "dns_messages", (long long)s->dns_messages, "malformed",
                        (long long)s->malformed, "syns", (long long)s->syns, "dropped_clients",
                        (long long)s->dropped_clients, "rng", (unsigned long long)s->rng,
                        "next_sweep", s->next_sweep, "clients", clients, "addr_names", addrs);
    if (out) { /* pcapng: every interface's link type, in the order first seen */
        PyObject *lts = PyList_New(0), *fmt = PyUnicode_FromString(s->ng ? "pcapng" : "pcap");
        int bad = !lts || !fmt;
        for (size_t i = 0; !bad && i < (s->ng ? s->nlts : 1); i++) {
            PyObject *v = PyLong_FromUnsignedLong(s->ng ? s->lts[i] : s->linktype);
            bad = !v || PyList_Append(lts, v) < 0;
            Py_XDECREF(v);
        }
        if (bad || PyDict_SetItemString(out, "format", fmt) < 0
                || PyDict_SetItemString(out, "linktypes", lts) < 0)
            Py_CLEAR(out);
        Py_XDECREF(lts);
        Py_XDECREF(fmt);
    }
done:
    Py_XDECREF(err);
    Py_XDECREF(clients);
    Py_XDECREF(names);
    Py_XDECREF(qtypes);
    Py_XDECREF(addrs);
    if (cache) {
        for (size_t i = 0; i < s->strs.n; i++)
            Py_XDECREF(cache[i]);
        PyMem_Free(cache);
    }
    return out;
}

/* -- the type --------------------------------------------------------------------------- */
static void Scanner_dealloc(Scanner *s) {
    for (size_t i = 0; i < s->nclients; i++)
        PyMem_Free(s->clients[i].lat);
    PyMem_Free(s->clients);
    omap_free(&s->client_map);
    omap_free(&s->names);
    omap_free(&s->qtypes);
    omap_free(&s->pending);
    omap_free(&s->addr_names);
    strtab_free(&s->strs);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* Scanner(ports_bitmap: 8192 bytes, any_port: bool, seed: 16 bytes) */
static int Scanner_init(Scanner *s, PyObject *args, PyObject *kw) {
    Py_buffer ports, seed;
    int any_port;
    (void)kw;
    if (s->clients || s->names.ents) {
        PyErr_SetString(PyExc_RuntimeError, "Scanner already initialised");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "y*py*", &ports, &any_port, &seed))
        return -1;
    int bad = ports.len != 8192 || seed.len != 16;
    if (!bad) {
        memcpy(s->ports, ports.buf, 8192);
        memcpy(s->key, seed.buf, 16);
    }
    PyBuffer_Release(&ports);
    PyBuffer_Release(&seed);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "ports must be 8192 bytes and seed 16");
        return -1;
    }
    s->any_port = any_port;
    s->next_sweep = -1e18;
    s->rng = 12345;
    s->last_ci = s->last_str = s->last_ae = -1;
    if (omap_init(&s->client_map, 17, sizeof(uint32_t)) < 0 ||
        omap_init(&s->names, 8, sizeof(Name)) < 0 || omap_init(&s->qtypes, 8, sizeof(int64_t)) < 0 ||
        omap_init(&s->pending, 40, sizeof(Pending)) < 0 ||
        omap_init(&s->addr_names, 17, sizeof(AddrNames)) < 0 || strtab_init(&s->strs) < 0)
        return -1;
    return 0;
}

static PyMethodDef Scanner_methods[] = {
    {"feed", (PyCFunction)Scanner_feed, METH_VARARGS,
     "feed(buffer, have, final) -> bytes used, or -1 once the scan has finished"},
    {"result", (PyCFunction)Scanner_result, METH_NOARGS, "the final state, as a dict"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ascend_doctor._dnsscan.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The classic-pcap DNS analysis in one pass (see the file's header comment).",
    .tp_methods = Scanner_methods,
    .tp_init = (initproc)Scanner_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_dnsscan",
                                       "The optional C path of dnsstats.analyse_capture.", -1,
                                       NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__dnsscan(void) {
    if (PyType_Ready(&ScannerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    Fallback = PyErr_NewException("ascend_doctor._dnsscan.Fallback", NULL, NULL);
    Py_XINCREF(Fallback);
    Py_INCREF(&ScannerType);
    if (!Fallback || PyModule_AddObject(m, "Fallback", Fallback) < 0 ||
        PyModule_AddObject(m, "Scanner", (PyObject *)&ScannerType) < 0 ||
        PyModule_AddObject(m, "LIMITS", Py_BuildValue("(iiiiiiiiiddd)", MAX_CAPLEN, MAX_ANSWERS,
                                                      MAX_NAMES, MAX_CLIENTS, MAX_PENDING,
                                                      MAX_SAMPLES, MAX_ADDR_NAMES, NAMES_PER_ADDR,
                                                      MAX_TARGETS, WINDOW_S, TIMEOUT_S, PAIR_S)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
