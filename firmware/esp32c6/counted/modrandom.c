// `random`: MicroPython's random functions on a xorshift32 generator. The chip seeds it from its hardware
// RNG; here it is seeded from the board's MAC, so one board's runs repeat (random.seed() reseeds).
#include "py/runtime.h"
#include "module.h"
#include "virt.h"

static uint32_t state;

static uint32_t next32(void) {
    if (state == 0) {
        state = 0x2545f491u;
        for (int i = 0; i < 6; i++) {
            state = (state ^ c6_bootinfo.mac[i]) * 16777619u;
        }
        state |= 1;
    }
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    return state;
}

static uint32_t bits(int n) {
    return n <= 0 ? 0 : next32() >> (32 - n);
}

static mp_obj_t random_getrandbits(mp_obj_t n_in) {
    mp_int_t n = mp_obj_get_int(n_in);
    if (n < 0 || n > 32) {
        mp_raise_ValueError(MP_ERROR_TEXT("bits must be 32 or less"));
    }
    return mp_obj_new_int_from_uint(bits(n));
}
static MP_DEFINE_CONST_FUN_OBJ_1(random_getrandbits_obj, random_getrandbits);

static mp_obj_t random_seed(size_t n_args, const mp_obj_t *args) {
    state = n_args && args[0] != mp_const_none ? (uint32_t)mp_obj_get_int_truncated(args[0]) : 0;
    if (n_args && args[0] != mp_const_none && state == 0) {
        state = 1;
    }
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(random_seed_obj, 0, 1, random_seed);

static mp_uint_t below(mp_uint_t n) { // uniform in [0, n)
    int b = 0;
    while ((1u << b) < n && b < 31) {
        b++;
    }
    mp_uint_t r;
    do {
        r = bits(b);
    } while (r >= n);
    return r;
}

static mp_obj_t random_randrange(size_t n_args, const mp_obj_t *args) {
    mp_int_t start = 0, stop, step = 1;
    if (n_args == 1) {
        stop = mp_obj_get_int(args[0]);
    } else {
        start = mp_obj_get_int(args[0]);
        stop = mp_obj_get_int(args[1]);
        if (n_args == 3) {
            step = mp_obj_get_int(args[2]);
        }
    }
    mp_int_t n = step > 0 ? (stop - start + step - 1) / step : step < 0 ? (start - stop - step - 1) / -step : 0;
    if (n <= 0) {
        mp_raise_ValueError(MP_ERROR_TEXT("empty range"));
    }
    return mp_obj_new_int(start + step * (mp_int_t)below(n));
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(random_randrange_obj, 1, 3, random_randrange);

static mp_obj_t random_randint(mp_obj_t a_in, mp_obj_t b_in) {
    mp_int_t a = mp_obj_get_int(a_in), b = mp_obj_get_int(b_in);
    if (b < a) {
        mp_raise_ValueError(MP_ERROR_TEXT("empty range"));
    }
    return mp_obj_new_int(a + (mp_int_t)below(b - a + 1));
}
static MP_DEFINE_CONST_FUN_OBJ_2(random_randint_obj, random_randint);

static mp_obj_t random_choice(mp_obj_t seq) {
    mp_int_t len = mp_obj_get_int(mp_obj_len(seq));
    if (len == 0) {
        mp_raise_type(&mp_type_IndexError);
    }
    return mp_obj_subscr(seq, mp_obj_new_int(below(len)), MP_OBJ_SENTINEL);
}
static MP_DEFINE_CONST_FUN_OBJ_1(random_choice_obj, random_choice);

static mp_float_t unit(void) {
    return (mp_float_t)bits(24) / (mp_float_t)(1u << 24);
}

static mp_obj_t random_random(void) {
    return mp_obj_new_float(unit());
}
static MP_DEFINE_CONST_FUN_OBJ_0(random_random_obj, random_random);

static mp_obj_t random_uniform(mp_obj_t a_in, mp_obj_t b_in) {
    mp_float_t a = mp_obj_get_float(a_in), b = mp_obj_get_float(b_in);
    return mp_obj_new_float(a + (b - a) * unit());
}
static MP_DEFINE_CONST_FUN_OBJ_2(random_uniform_obj, random_uniform);

static const mp_rom_map_elem_t random_module_globals_table[] = {
    { MP_ROM_QSTR(MP_QSTR___name__), MP_ROM_QSTR(MP_QSTR_random) },
    C6_FUN(random, getrandbits),
    C6_FUN(random, seed),
    C6_FUN(random, randrange),
    C6_FUN(random, randint),
    C6_FUN(random, choice),
    C6_FUN(random, random),
    C6_FUN(random, uniform),
};
C6_MODULE(MP_REGISTER_EXTENSIBLE_MODULE, random, random_module_globals_table);
