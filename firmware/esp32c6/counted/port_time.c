// The port's part of `time` (included by extmod/modtime.c through MICROPY_PY_TIME_INCLUDEFILE, as the esp32
// port's modtime.c is): the RTC's time (mphalport.c) and sleeps to the microsecond on the counted clock.
#include "py/mphal.h"
#include "py/obj.h"
#include "shared/timeutils/timeutils.h"

static mp_obj_t mp_time_localtime_get(void) {
    timeutils_struct_time_t tm;
    timeutils_seconds_since_epoch_to_struct_time(mp_hal_time_ns() / 1000000000u, &tm);
    mp_obj_t tuple[8] = {
        mp_obj_new_int(tm.tm_year), mp_obj_new_int(tm.tm_mon), mp_obj_new_int(tm.tm_mday),
        mp_obj_new_int(tm.tm_hour), mp_obj_new_int(tm.tm_min), mp_obj_new_int(tm.tm_sec),
        mp_obj_new_int(tm.tm_wday), mp_obj_new_int(tm.tm_yday),
    };
    return mp_obj_new_tuple(8, tuple);
}

static mp_obj_t mp_time_time_get(void) {
    return timeutils_obj_from_timestamp(mp_hal_time_ns() / 1000000000u);
}

// time.sleep(s): to the microsecond, as the chip's (esp32 sleeps in its RTOS ticks; a float keeps its fraction)
static void mp_time_sleep(mp_obj_t seconds_o) {
    mp_float_t s = mp_obj_get_float(seconds_o);
    if (s > 0) {
        mp_hal_delay_us((mp_uint_t)(s * MICROPY_FLOAT_CONST(1e6) + MICROPY_FLOAT_CONST(0.5)));
    }
}
