// `binascii`: hexlify/unhexlify, base64 and crc32, in C as in MicroPython's own module.
#include <string.h>

#include "py/runtime.h"
#include "module.h"

static mp_obj_t binascii_hexlify(size_t n_args, const mp_obj_t *args) {
    mp_buffer_info_t buf;
    mp_get_buffer_raise(args[0], &buf, MP_BUFFER_READ);
    const char *sep = NULL;
    if (n_args > 1 && args[1] != mp_const_none) {
        size_t sep_len;
        sep = mp_obj_str_get_data(args[1], &sep_len);
        if (sep_len != 1) {
            mp_raise_ValueError(MP_ERROR_TEXT("sep must be length 1"));
        }
    }
    if (buf.len == 0) {
        return mp_const_empty_bytes;
    }
    vstr_t vstr;
    vstr_init_len(&vstr, buf.len * 2 + (sep ? buf.len - 1 : 0));
    static const char hex[] = "0123456789abcdef";
    char *o = vstr.buf;
    const uint8_t *in = buf.buf;
    for (size_t i = 0; i < buf.len; i++) {
        if (sep && i) {
            *o++ = *sep;
        }
        *o++ = hex[in[i] >> 4];
        *o++ = hex[in[i] & 15];
    }
    return mp_obj_new_bytes_from_vstr(&vstr);
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(binascii_hexlify_obj, 1, 2, binascii_hexlify);

static int hexval(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static mp_obj_t binascii_unhexlify(mp_obj_t data) {
    mp_buffer_info_t buf;
    mp_get_buffer_raise(data, &buf, MP_BUFFER_READ);
    if (buf.len & 1) {
        mp_raise_ValueError(MP_ERROR_TEXT("odd-length string"));
    }
    vstr_t vstr;
    vstr_init_len(&vstr, buf.len / 2);
    const char *in = buf.buf;
    for (size_t i = 0; i < buf.len / 2; i++) {
        int hi = hexval(in[2 * i]), lo = hexval(in[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            mp_raise_ValueError(MP_ERROR_TEXT("non-hex digit found"));
        }
        vstr.buf[i] = (char)(hi << 4 | lo);
    }
    return mp_obj_new_bytes_from_vstr(&vstr);
}
static MP_DEFINE_CONST_FUN_OBJ_1(binascii_unhexlify_obj, binascii_unhexlify);

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64val(uint8_t c) {
    const char *p = c ? strchr(b64, c) : NULL;
    return p ? p - b64 : -1;
}

static mp_obj_t binascii_a2b_base64(mp_obj_t data) {
    mp_buffer_info_t buf;
    mp_get_buffer_raise(data, &buf, MP_BUFFER_READ);
    vstr_t vstr;
    vstr_init(&vstr, buf.len * 3 / 4 + 1);
    const uint8_t *in = buf.buf;
    uint32_t acc = 0;
    int bits = 0, pad = 0;
    for (size_t i = 0; i < buf.len; i++) {
        if (in[i] == '=') {
            pad++;
            continue;
        }
        int v = b64val(in[i]);
        if (v < 0) {
            continue; // whitespace and other characters are skipped, as CPython does
        }
        if (pad) {
            mp_raise_ValueError(MP_ERROR_TEXT("invalid padding"));
        }
        acc = acc << 6 | v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            vstr_add_byte(&vstr, (byte)(acc >> bits));
        }
    }
    if (bits >= 6 || (bits && pad == 0 && (acc & ((1u << bits) - 1)))) {
        mp_raise_ValueError(MP_ERROR_TEXT("incorrect padding"));
    }
    return mp_obj_new_bytes_from_vstr(&vstr);
}
static MP_DEFINE_CONST_FUN_OBJ_1(binascii_a2b_base64_obj, binascii_a2b_base64);

static mp_obj_t binascii_b2a_base64(size_t n_args, const mp_obj_t *pos, mp_map_t *kw) {
    static const mp_arg_t allowed[] = {
        { MP_QSTR_, MP_ARG_REQUIRED | MP_ARG_OBJ, {.u_rom_obj = MP_ROM_NONE} },
        { MP_QSTR_newline, MP_ARG_KW_ONLY | MP_ARG_BOOL, {.u_bool = true} },
    };
    mp_arg_val_t a[2];
    mp_arg_parse_all(n_args, pos, kw, 2, allowed, a);
    mp_buffer_info_t buf;
    mp_get_buffer_raise(a[0].u_obj, &buf, MP_BUFFER_READ);
    vstr_t vstr;
    vstr_init(&vstr, (buf.len + 2) / 3 * 4 + 1);
    const uint8_t *in = buf.buf;
    for (size_t i = 0; i < buf.len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        size_t n = buf.len - i;
        if (n > 1) {
            v |= (uint32_t)in[i + 1] << 8;
        }
        if (n > 2) {
            v |= in[i + 2];
        }
        vstr_add_byte(&vstr, b64[v >> 18 & 63]);
        vstr_add_byte(&vstr, b64[v >> 12 & 63]);
        vstr_add_byte(&vstr, n > 1 ? b64[v >> 6 & 63] : '=');
        vstr_add_byte(&vstr, n > 2 ? b64[v & 63] : '=');
    }
    if (a[1].u_bool) {
        vstr_add_byte(&vstr, '\n');
    }
    return mp_obj_new_bytes_from_vstr(&vstr);
}
static MP_DEFINE_CONST_FUN_OBJ_KW(binascii_b2a_base64_obj, 1, binascii_b2a_base64);

uint32_t c6_crc32(uint32_t crc, const uint8_t *p, size_t len) {
    crc = ~crc;
    while (len--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++) {
            crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
        }
    }
    return ~crc;
}

static mp_obj_t binascii_crc32(size_t n_args, const mp_obj_t *args) {
    mp_buffer_info_t buf;
    mp_get_buffer_raise(args[0], &buf, MP_BUFFER_READ);
    uint32_t crc = n_args > 1 ? mp_obj_get_int_truncated(args[1]) : 0;
    return mp_obj_new_int_from_uint(c6_crc32(crc, buf.buf, buf.len));
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(binascii_crc32_obj, 1, 2, binascii_crc32);

static const mp_rom_map_elem_t binascii_module_globals_table[] = {
    { MP_ROM_QSTR(MP_QSTR___name__), MP_ROM_QSTR(MP_QSTR_binascii) },
    C6_FUN(binascii, hexlify),
    C6_FUN(binascii, unhexlify),
    C6_FUN(binascii, a2b_base64),
    C6_FUN(binascii, b2a_base64),
    C6_FUN(binascii, crc32),
};
C6_MODULE(MP_REGISTER_EXTENSIBLE_MODULE, binascii, binascii_module_globals_table);
