// `deflate.DeflateIO` for reading (decompression of RAW, ZLIB and GZIP streams), written here in C: a
// streaming inflater with canonical Huffman decoding bit by bit, as MicroPython's own (uzlib) decodes, and a
// window of the stream's size. Compression is not provided (as on ports built without it).
#include <string.h>

#include "py/mperrno.h"
#include "py/runtime.h"
#include "py/stream.h"
#include "module.h"

enum { FORMAT_AUTO = 0, FORMAT_RAW = 1, FORMAT_ZLIB = 2, FORMAT_GZIP = 3 };
enum { ST_HEADER, ST_BLOCK, ST_STORED, ST_HUFF, ST_DONE };

typedef struct {
    uint16_t counts[16];
    uint16_t symbols[288];
} huff_t;

typedef struct {
    mp_obj_base_t base;
    mp_obj_t stream;
    bool close;
    uint8_t format;
    uint8_t state;
    bool final;
    uint8_t wbits;
    uint8_t *window;
    uint32_t wsize;
    uint32_t wpos;
    uint32_t bitbuf;
    int bitcount;
    uint32_t stored_left;
    uint32_t copy_len;
    uint32_t copy_dist;
    uint8_t in[64];
    uint8_t in_pos, in_len;
    huff_t lit, dist;
} deflateio_t;

static MP_NORETURN void data_error(void) {
    mp_raise_OSError(MP_EINVAL);
}

static int in_byte(deflateio_t *d) {
    if (d->in_pos == d->in_len) {
        int err;
        mp_uint_t n = mp_stream_rw(d->stream, d->in, sizeof(d->in), &err, MP_STREAM_RW_READ | MP_STREAM_RW_ONCE);
        if (err) {
            mp_raise_OSError(err);
        }
        if (n == 0) {
            data_error(); // the compressed stream ended early
        }
        d->in_pos = 0;
        d->in_len = n;
    }
    return d->in[d->in_pos++];
}

static uint32_t bits(deflateio_t *d, int n) {
    while (d->bitcount < n) {
        d->bitbuf |= (uint32_t)in_byte(d) << d->bitcount;
        d->bitcount += 8;
    }
    uint32_t v = d->bitbuf & ((1u << n) - 1);
    d->bitbuf >>= n;
    d->bitcount -= n;
    return v;
}

static void build(huff_t *h, const uint8_t *lengths, int n) {
    uint16_t offs[16];
    memset(h->counts, 0, sizeof(h->counts));
    for (int i = 0; i < n; i++) {
        h->counts[lengths[i]]++;
    }
    h->counts[0] = 0;
    offs[1] = 0;
    for (int i = 1; i < 15; i++) {
        offs[i + 1] = offs[i] + h->counts[i];
    }
    for (int i = 0; i < n; i++) {
        if (lengths[i]) {
            h->symbols[offs[lengths[i]]++] = i;
        }
    }
}

static int decode(deflateio_t *d, const huff_t *h) {
    int code = 0, first = 0, index = 0;
    for (int len = 1; len < 16; len++) {
        code |= bits(d, 1);
        int count = h->counts[len];
        if (code - count < first) {
            return h->symbols[index + (code - first)];
        }
        index += count;
        first += count;
        first <<= 1;
        code <<= 1;
    }
    data_error();
}

static void fixed_tables(deflateio_t *d) {
    uint8_t lengths[288];
    memset(lengths, 8, 144);
    memset(lengths + 144, 9, 112);
    memset(lengths + 256, 7, 24);
    memset(lengths + 280, 8, 8);
    build(&d->lit, lengths, 288);
    memset(lengths, 5, 30);
    build(&d->dist, lengths, 30);
}

static void dynamic_tables(deflateio_t *d) {
    static const uint8_t order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    int hlit = bits(d, 5) + 257, hdist = bits(d, 5) + 1, hclen = bits(d, 4) + 4;
    if (hlit > 286 || hdist > 30) {
        data_error();
    }
    uint8_t lengths[286 + 30];
    memset(lengths, 0, 19);
    for (int i = 0; i < hclen; i++) {
        lengths[order[i]] = bits(d, 3);
    }
    build(&d->lit, lengths, 19); // the code-length code, briefly in the literal table
    for (int i = 0; i < hlit + hdist;) {
        int sym = decode(d, &d->lit);
        int repeat, value = 0;
        if (sym < 16) {
            lengths[i++] = sym;
            continue;
        } else if (sym == 16) {
            if (i == 0) {
                data_error();
            }
            value = lengths[i - 1];
            repeat = 3 + bits(d, 2);
        } else if (sym == 17) {
            repeat = 3 + bits(d, 3);
        } else {
            repeat = 11 + bits(d, 7);
        }
        if (i + repeat > hlit + hdist) {
            data_error();
        }
        while (repeat--) {
            lengths[i++] = value;
        }
    }
    build(&d->lit, lengths, hlit);
    build(&d->dist, lengths + hlit, hdist);
}

static void header(deflateio_t *d) {
    int format = d->format;
    uint8_t b0 = in_byte(d);
    if (format == FORMAT_AUTO) {
        format = b0 == 0x1f ? FORMAT_GZIP : FORMAT_ZLIB;
    }
    uint32_t wbits = d->wbits ? d->wbits : 15;
    if (format == FORMAT_ZLIB) {
        uint8_t b1 = in_byte(d);
        if ((b0 & 0x0f) != 8 || ((b0 << 8) | b1) % 31 || (b1 & 0x20)) {
            data_error();
        }
        wbits = (b0 >> 4) + 8;
    } else if (format == FORMAT_GZIP) {
        uint8_t b1 = in_byte(d), method = in_byte(d), flags = in_byte(d);
        if (b0 != 0x1f || b1 != 0x8b || method != 8) {
            data_error();
        }
        for (int i = 0; i < 6; i++) {
            in_byte(d); // mtime, xfl, os
        }
        if (flags & 4) {
            int xlen = in_byte(d);
            xlen |= in_byte(d) << 8;
            while (xlen--) {
                in_byte(d);
            }
        }
        for (int f = 8; f <= 16; f <<= 1) { // name, comment
            if (flags & f) {
                while (in_byte(d)) {
                }
            }
        }
        if (flags & 2) {
            in_byte(d);
            in_byte(d);
        }
    } else {
        d->in_pos--; // a raw stream starts right away
    }
    if (wbits < 8 || wbits > 15) {
        data_error();
    }
    d->wsize = 1u << wbits;
    d->window = m_new(uint8_t, d->wsize);
    d->format = format;
}

static inline void put(deflateio_t *d, uint8_t b) {
    d->window[d->wpos++ & (d->wsize - 1)] = b;
}

// The next byte of the decompressed stream, or -1 at its end.
static int next_byte(deflateio_t *d) {
    static const uint16_t len_base[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59,
                                          67, 83, 99, 115, 131, 163, 195, 227, 258};
    static const uint8_t len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4,
                                          5, 5, 5, 5, 0};
    static const uint16_t dist_base[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513,
                                           769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
    static const uint8_t dist_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10,
                                           11, 11, 12, 12, 13, 13};
    for (;;) {
        if (d->copy_len) {
            uint8_t b = d->window[(d->wpos - d->copy_dist) & (d->wsize - 1)];
            put(d, b);
            d->copy_len--;
            return b;
        }
        switch (d->state) {
            case ST_HEADER:
                header(d);
                d->state = ST_BLOCK;
                break;
            case ST_BLOCK: {
                if (d->final) {
                    d->state = ST_DONE; // the zlib/gzip trailer's checksum is not verified
                    break;
                }
                d->final = bits(d, 1);
                int type = bits(d, 2);
                if (type == 0) {
                    d->bitbuf = 0;
                    d->bitcount = 0;
                    uint32_t len = in_byte(d);
                    len |= in_byte(d) << 8;
                    uint32_t nlen = in_byte(d);
                    nlen |= in_byte(d) << 8;
                    if ((len ^ 0xffff) != nlen) {
                        data_error();
                    }
                    d->stored_left = len;
                    d->state = ST_STORED;
                } else if (type == 1) {
                    fixed_tables(d);
                    d->state = ST_HUFF;
                } else if (type == 2) {
                    dynamic_tables(d);
                    d->state = ST_HUFF;
                } else {
                    data_error();
                }
                break;
            }
            case ST_STORED:
                if (d->stored_left == 0) {
                    d->state = ST_BLOCK;
                    break;
                } else {
                    uint8_t b = in_byte(d);
                    d->stored_left--;
                    put(d, b);
                    return b;
                }
            case ST_HUFF: {
                int sym = decode(d, &d->lit);
                if (sym < 256) {
                    put(d, sym);
                    return sym;
                }
                if (sym == 256) {
                    d->state = ST_BLOCK;
                    break;
                }
                sym -= 257;
                if (sym >= 29) {
                    data_error();
                }
                uint32_t len = len_base[sym] + bits(d, len_extra[sym]);
                int ds = decode(d, &d->dist);
                if (ds >= 30) {
                    data_error();
                }
                uint32_t dist = dist_base[ds] + bits(d, dist_extra[ds]);
                if (dist > d->wsize || dist > d->wpos) {
                    data_error();
                }
                d->copy_len = len;
                d->copy_dist = dist;
                break;
            }
            default:
                return -1;
        }
    }
}

static mp_uint_t deflateio_read(mp_obj_t self_in, void *buf, mp_uint_t size, int *errcode) {
    deflateio_t *d = MP_OBJ_TO_PTR(self_in);
    if (d->stream == MP_OBJ_NULL) {
        *errcode = MP_EBADF;
        return MP_STREAM_ERROR;
    }
    uint8_t *out = buf;
    mp_uint_t n = 0;
    while (n < size) {
        int b = next_byte(d);
        if (b < 0) {
            break;
        }
        out[n++] = b;
    }
    return n;
}

static mp_uint_t deflateio_ioctl(mp_obj_t self_in, mp_uint_t request, uintptr_t arg, int *errcode) {
    deflateio_t *d = MP_OBJ_TO_PTR(self_in);
    if (request == MP_STREAM_CLOSE) {
        if (d->stream != MP_OBJ_NULL && d->close) {
            mp_stream_close(d->stream);
        }
        d->stream = MP_OBJ_NULL;
        return 0;
    }
    *errcode = MP_EINVAL;
    return MP_STREAM_ERROR;
}

static mp_obj_t deflateio_make_new(const mp_obj_type_t *type, size_t n_args, size_t n_kw, const mp_obj_t *args) {
    mp_arg_check_num(n_args, n_kw, 1, 4, false);
    mp_get_stream_raise(args[0], MP_STREAM_OP_READ);
    deflateio_t *d = mp_obj_malloc(deflateio_t, type);
    d->stream = args[0];
    d->format = n_args > 1 ? mp_obj_get_int(args[1]) : FORMAT_AUTO;
    d->wbits = n_args > 2 ? mp_obj_get_int(args[2]) : 0;
    d->close = n_args > 3 && mp_obj_is_true(args[3]);
    if (d->format > FORMAT_GZIP || (d->wbits && (d->wbits < 5 || d->wbits > 15))) {
        mp_raise_ValueError(NULL);
    }
    d->state = ST_HEADER;
    d->final = false;
    d->window = NULL;
    d->wsize = 0;
    d->wpos = 0;
    d->bitbuf = 0;
    d->bitcount = 0;
    d->copy_len = 0;
    d->in_pos = d->in_len = 0;
    return MP_OBJ_FROM_PTR(d);
}

static const mp_rom_map_elem_t deflateio_locals_table[] = {
    C6_FUN(mp_stream, read),
    C6_FUN(mp_stream, readinto),
    C6_FUN(mp_stream_unbuffered, readline),
    C6_FUN(mp_stream, close),
    { MP_ROM_QSTR(MP_QSTR___enter__), MP_ROM_PTR(&mp_identity_obj) },
    C6_FUN(mp_stream, __exit__),
};
static MP_DEFINE_CONST_DICT(deflateio_locals_dict, deflateio_locals_table);

static const mp_stream_p_t deflateio_stream_p = {
    .read = deflateio_read,
    .ioctl = deflateio_ioctl,
};

static MP_DEFINE_CONST_OBJ_TYPE(
    deflateio_type, MP_QSTR_DeflateIO, MP_TYPE_FLAG_NONE,
    make_new, deflateio_make_new, protocol, &deflateio_stream_p, locals_dict, &deflateio_locals_dict);

static const mp_rom_map_elem_t deflate_module_globals_table[] = {
    { MP_ROM_QSTR(MP_QSTR___name__), MP_ROM_QSTR(MP_QSTR_deflate) },
    { MP_ROM_QSTR(MP_QSTR_DeflateIO), MP_ROM_PTR(&deflateio_type) },
    { MP_ROM_QSTR(MP_QSTR_AUTO), MP_ROM_INT(FORMAT_AUTO) },
    { MP_ROM_QSTR(MP_QSTR_RAW), MP_ROM_INT(FORMAT_RAW) },
    { MP_ROM_QSTR(MP_QSTR_ZLIB), MP_ROM_INT(FORMAT_ZLIB) },
    { MP_ROM_QSTR(MP_QSTR_GZIP), MP_ROM_INT(FORMAT_GZIP) },
};
C6_MODULE(MP_REGISTER_MODULE, deflate, deflate_module_globals_table);
