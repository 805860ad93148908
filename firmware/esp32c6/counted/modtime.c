// The `time` module on the counted clock (clock.c): ticks and sleeps in the chip's time at 160 MHz.
#include "py/mphal.h"
#include "py/runtime.h"
#include "py/smallint.h"
#include "shared/timeutils/timeutils.h"
#include "module.h"

#define TICKS_PERIOD (MICROPY_PY_TIME_TICKS_PERIOD)
#define TICKS_MAX (TICKS_PERIOD - 1)
#define TICKS_HALF (TICKS_PERIOD / 2)

static mp_obj_t time_sleep(mp_obj_t seconds) {
    #if MICROPY_PY_BUILTINS_FLOAT
    mp_float_t s = mp_obj_get_float(seconds);
    if (s > 0) {
        mp_hal_delay_us((mp_uint_t)(s * MICROPY_FLOAT_CONST(1e6) + MICROPY_FLOAT_CONST(0.5)));
    }
    #else
    mp_hal_delay_ms(1000 * mp_obj_get_int(seconds));
    #endif
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_1(time_sleep_obj, time_sleep);

// A sleep of `n_in` units of `delay` (none when it is not positive).
static mp_obj_t sleep_for(mp_obj_t n_in, void (*delay)(mp_uint_t)) {
    mp_int_t n = mp_obj_get_int(n_in);
    if (n > 0) {
        delay(n);
    }
    return mp_const_none;
}

static mp_obj_t time_sleep_ms(mp_obj_t ms) {
    return sleep_for(ms, mp_hal_delay_ms);
}
static MP_DEFINE_CONST_FUN_OBJ_1(time_sleep_ms_obj, time_sleep_ms);

static mp_obj_t time_sleep_us(mp_obj_t us) {
    return sleep_for(us, mp_hal_delay_us);
}
static MP_DEFINE_CONST_FUN_OBJ_1(time_sleep_us_obj, time_sleep_us);

static mp_obj_t time_ticks_ms(void) {
    return MP_OBJ_NEW_SMALL_INT(mp_hal_ticks_ms() & TICKS_MAX);
}
static MP_DEFINE_CONST_FUN_OBJ_0(time_ticks_ms_obj, time_ticks_ms);

static mp_obj_t time_ticks_us(void) {
    return MP_OBJ_NEW_SMALL_INT(mp_hal_ticks_us() & TICKS_MAX);
}
static MP_DEFINE_CONST_FUN_OBJ_0(time_ticks_us_obj, time_ticks_us);

static mp_obj_t time_ticks_cpu(void) {
    return MP_OBJ_NEW_SMALL_INT(mp_hal_ticks_cpu() & TICKS_MAX);
}
static MP_DEFINE_CONST_FUN_OBJ_0(time_ticks_cpu_obj, time_ticks_cpu);

static mp_obj_t time_ticks_diff(mp_obj_t end_in, mp_obj_t start_in) {
    mp_uint_t start = MP_OBJ_SMALL_INT_VALUE(start_in);
    mp_uint_t end = MP_OBJ_SMALL_INT_VALUE(end_in);
    mp_int_t diff = ((end - start + TICKS_HALF) & TICKS_MAX) - TICKS_HALF;
    return MP_OBJ_NEW_SMALL_INT(diff);
}
static MP_DEFINE_CONST_FUN_OBJ_2(time_ticks_diff_obj, time_ticks_diff);

static mp_obj_t time_ticks_add(mp_obj_t ticks_in, mp_obj_t delta_in) {
    mp_uint_t ticks = MP_OBJ_SMALL_INT_VALUE(ticks_in);
    mp_uint_t delta = mp_obj_get_int(delta_in);
    if (-delta > TICKS_HALF || delta > TICKS_HALF - 1) {
        mp_raise_msg(&mp_type_OverflowError, MP_ERROR_TEXT("ticks interval overflow"));
    }
    return MP_OBJ_NEW_SMALL_INT((ticks + delta) & TICKS_MAX);
}
static MP_DEFINE_CONST_FUN_OBJ_2(time_ticks_add_obj, time_ticks_add);

static mp_obj_t time_time(void) {
    return mp_obj_new_int_from_ull(mp_hal_time_ns() / 1000000000u);
}
static MP_DEFINE_CONST_FUN_OBJ_0(time_time_obj, time_time);

static mp_obj_t time_time_ns(void) {
    return mp_obj_new_int_from_ull(mp_hal_time_ns());
}
static MP_DEFINE_CONST_FUN_OBJ_0(time_time_ns_obj, time_time_ns);

static mp_obj_t time_localtime(size_t n_args, const mp_obj_t *args) {
    mp_timestamp_t seconds;
    if (n_args == 0 || args[0] == mp_const_none) {
        seconds = mp_hal_time_ns() / 1000000000u;
    } else {
        seconds = timeutils_obj_get_timestamp(args[0]);
    }
    timeutils_struct_time_t tm;
    timeutils_seconds_since_epoch_to_struct_time(seconds, &tm);
    mp_obj_t tuple[8] = {
        mp_obj_new_int(tm.tm_year), mp_obj_new_int(tm.tm_mon), mp_obj_new_int(tm.tm_mday),
        mp_obj_new_int(tm.tm_hour), mp_obj_new_int(tm.tm_min), mp_obj_new_int(tm.tm_sec),
        mp_obj_new_int(tm.tm_wday), mp_obj_new_int(tm.tm_yday),
    };
    return mp_obj_new_tuple(8, tuple);
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(time_localtime_obj, 0, 1, time_localtime);

static mp_obj_t time_mktime(mp_obj_t tuple) {
    size_t len;
    mp_obj_t *elem;
    mp_obj_get_array(tuple, &len, &elem);
    if (len < 8 || len > 9) {
        mp_raise_TypeError(MP_ERROR_TEXT("mktime needs a tuple of length 8 or 9"));
    }
    return timeutils_obj_from_timestamp(timeutils_mktime(mp_obj_get_int(elem[0]), mp_obj_get_int(elem[1]),
        mp_obj_get_int(elem[2]), mp_obj_get_int(elem[3]), mp_obj_get_int(elem[4]), mp_obj_get_int(elem[5])));
}
static MP_DEFINE_CONST_FUN_OBJ_1(time_mktime_obj, time_mktime);

static const mp_rom_map_elem_t time_module_globals_table[] = {
    { MP_ROM_QSTR(MP_QSTR___name__), MP_ROM_QSTR(MP_QSTR_time) },
    { MP_ROM_QSTR(MP_QSTR_gmtime), MP_ROM_PTR(&time_localtime_obj) },
    C6_FUN(time, localtime),
    C6_FUN(time, mktime),
    C6_FUN(time, time),
    C6_FUN(time, time_ns),
    C6_FUN(time, sleep),
    C6_FUN(time, sleep_ms),
    C6_FUN(time, sleep_us),
    C6_FUN(time, ticks_ms),
    C6_FUN(time, ticks_us),
    C6_FUN(time, ticks_cpu),
    C6_FUN(time, ticks_add),
    C6_FUN(time, ticks_diff),
};
C6_MODULE(MP_REGISTER_EXTENSIBLE_MODULE, time, time_module_globals_table);
