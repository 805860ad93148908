// `hashlib.sha256` in C (FIPS 180-4), as the chip's firmware computes it (there in mbedTLS / the SHA
// accelerator; here on the counted core, so hashing costs the core's cycles).
#include <string.h>

#include "py/runtime.h"
#include "module.h"

typedef struct {
    uint32_t state[8];
    uint64_t length; // bytes hashed so far
    uint8_t block[64];
    uint32_t used;
} sha256_ctx_t;

typedef struct {
    mp_obj_base_t base;
    sha256_ctx_t ctx;
    bool final;
} sha256_obj_t;

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(sha256_ctx_t *c, const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++) {
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    }
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = c->state[0], b = c->state[1], cc = c->state[2], d = c->state[3];
    uint32_t e = c->state[4], f = c->state[5], g = c->state[6], h = c->state[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = cc;
        cc = b;
        b = a;
        a = t1 + t2;
    }
    c->state[0] += a;
    c->state[1] += b;
    c->state[2] += cc;
    c->state[3] += d;
    c->state[4] += e;
    c->state[5] += f;
    c->state[6] += g;
    c->state[7] += h;
}

static void sha256_init(sha256_ctx_t *c) {
    static const uint32_t iv[8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    };
    memcpy(c->state, iv, sizeof(iv));
    c->length = 0;
    c->used = 0;
}

static void sha256_update(sha256_ctx_t *c, const uint8_t *data, size_t len) {
    c->length += len;
    while (len) {
        size_t n = 64 - c->used;
        if (n > len) {
            n = len;
        }
        memcpy(c->block + c->used, data, n);
        c->used += n;
        data += n;
        len -= n;
        if (c->used == 64) {
            sha256_block(c, c->block);
            c->used = 0;
        }
    }
}

static void sha256_final(sha256_ctx_t *c, uint8_t out[32]) {
    uint64_t bits = c->length * 8;
    uint8_t pad = 0x80;
    sha256_update(c, &pad, 1);
    pad = 0;
    while (c->used != 56) {
        sha256_update(c, &pad, 1);
    }
    uint8_t len_be[8];
    for (int i = 0; i < 8; i++) {
        len_be[i] = (uint8_t)(bits >> (56 - 8 * i));
    }
    sha256_update(c, len_be, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = c->state[i] >> 24;
        out[4 * i + 1] = c->state[i] >> 16;
        out[4 * i + 2] = c->state[i] >> 8;
        out[4 * i + 3] = c->state[i];
    }
}

static mp_obj_t sha256_update_obj_fn(mp_obj_t self_in, mp_obj_t data) {
    sha256_obj_t *self = MP_OBJ_TO_PTR(self_in);
    if (self->final) {
        mp_raise_ValueError(MP_ERROR_TEXT("hash is final"));
    }
    mp_buffer_info_t buf;
    mp_get_buffer_raise(data, &buf, MP_BUFFER_READ);
    sha256_update(&self->ctx, buf.buf, buf.len);
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_2(sha256_update_obj, sha256_update_obj_fn);

static mp_obj_t sha256_digest(mp_obj_t self_in) {
    sha256_obj_t *self = MP_OBJ_TO_PTR(self_in);
    if (self->final) {
        mp_raise_ValueError(MP_ERROR_TEXT("hash is final"));
    }
    self->final = true;
    vstr_t vstr;
    vstr_init_len(&vstr, 32);
    sha256_final(&self->ctx, (uint8_t *)vstr.buf);
    return mp_obj_new_bytes_from_vstr(&vstr);
}
static MP_DEFINE_CONST_FUN_OBJ_1(sha256_digest_obj, sha256_digest);

static mp_obj_t sha256_make_new(const mp_obj_type_t *type, size_t n_args, size_t n_kw, const mp_obj_t *args) {
    mp_arg_check_num(n_args, n_kw, 0, 1, false);
    sha256_obj_t *o = mp_obj_malloc(sha256_obj_t, type);
    sha256_init(&o->ctx);
    o->final = false;
    if (n_args == 1) {
        sha256_update_obj_fn(MP_OBJ_FROM_PTR(o), args[0]);
    }
    return MP_OBJ_FROM_PTR(o);
}

static const mp_rom_map_elem_t sha256_locals_table[] = {
    C6_FUN(sha256, update),
    C6_FUN(sha256, digest),
};
static MP_DEFINE_CONST_DICT(sha256_locals_dict, sha256_locals_table);

static MP_DEFINE_CONST_OBJ_TYPE(
    sha256_type, MP_QSTR_sha256, MP_TYPE_FLAG_NONE,
    make_new, sha256_make_new, locals_dict, &sha256_locals_dict);

static const mp_rom_map_elem_t hashlib_module_globals_table[] = {
    { MP_ROM_QSTR(MP_QSTR___name__), MP_ROM_QSTR(MP_QSTR_hashlib) },
    { MP_ROM_QSTR(MP_QSTR_sha256), MP_ROM_PTR(&sha256_type) },
};
C6_MODULE(MP_REGISTER_EXTENSIBLE_MODULE, hashlib, hashlib_module_globals_table);
