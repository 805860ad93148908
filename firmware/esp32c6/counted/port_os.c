// The port's part of `os` (included by extmod/modos.c through MICROPY_PY_OS_INCLUDEFILE, as the esp32 port's
// modos.c is): urandom from the board's RNG (rng.c).
#include "py/runtime.h"

static mp_obj_t mp_os_urandom(mp_obj_t num) {
    mp_int_t n = mp_obj_get_int(num);
    if (n < 0) {
        mp_raise_ValueError(MP_ERROR_TEXT("negative length"));
    }
    vstr_t vstr;
    vstr_init_len(&vstr, n);
    uint32_t r = 0;
    for (mp_int_t i = 0; i < n; i++) {
        if ((i & 3) == 0) {
            r = c6_random32();
        }
        vstr.buf[i] = r;
        r >>= 8;
    }
    return mp_obj_new_bytes_from_vstr(&vstr);
}
static MP_DEFINE_CONST_FUN_OBJ_1(mp_os_urandom_obj, mp_os_urandom);
