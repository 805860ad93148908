// `_c6machine`: what `machine` (modules/machine.py) needs from the chip: resets, identity, sleeps, the
// hardware timers and the task watchdog on the counted clock.
#include "py/mphal.h"
#include "py/runtime.h"
#include "shared/runtime/pyexec.h"
#include "module.h"
#include "virt.h"

#define TIMER_COUNT (2) // one per timer group on the C6

typedef struct {
    uint64_t due_ns;    // 0: not armed
    uint64_t period_ns;
    bool periodic;
} c6_timer_t;

static c6_timer_t timers[TIMER_COUNT];
static uint64_t wdt_due_ns, wdt_timeout_ns; // survive a soft reset, as the chip's task watchdog does
static uint32_t cpu_hz = 160000000;
uint64_t c6_rtc_offset_ns = 946684800ull * 1000000000ull; // the RTC starts at 2000-01-01, as the esp32's

MP_REGISTER_ROOT_POINTER(mp_obj_t c6_timer_callback[2]);
MP_REGISTER_ROOT_POINTER(mp_obj_t c6_timer_obj[2]);

static void rearm(void) {
    uint64_t next = wdt_due_ns;
    for (int i = 0; i < TIMER_COUNT; i++) {
        if (timers[i].due_ns && (!next || timers[i].due_ns < next)) {
            next = timers[i].due_ns;
        }
    }
    clock_set_alarm(next);
}

// The counted clock reached an alarm (interrupt context): fire what is due.
void c6_alarm(void) {
    uint64_t now = clock_chip_ns();
    if (wdt_due_ns && now >= wdt_due_ns) {
        c6_exit(EXIT_WDT); // the board prints the task watchdog's panic and reboots the chip
    }
    for (int i = 0; i < TIMER_COUNT; i++) {
        c6_timer_t *t = &timers[i];
        if (!t->due_ns || now < t->due_ns) {
            continue;
        }
        mp_obj_t cb = MP_STATE_PORT(c6_timer_callback[i]);
        if (cb != MP_OBJ_NULL && cb != mp_const_none) {
            mp_sched_schedule(cb, MP_STATE_PORT(c6_timer_obj[i])); // queue full: this tick is lost
        }
        if (t->periodic) {
            while (t->due_ns <= now) {
                t->due_ns += t->period_ns;
            }
        } else {
            t->due_ns = 0;
        }
    }
    rearm();
}

// Called at soft reset: timers stop (their callbacks belonged to the old heap); the watchdog keeps running.
void c6_machine_soft_reset_deinit(void) {
    for (int i = 0; i < TIMER_COUNT; i++) {
        timers[i].due_ns = 0;
        MP_STATE_PORT(c6_timer_callback[i]) = MP_OBJ_NULL;
        MP_STATE_PORT(c6_timer_obj[i]) = MP_OBJ_NULL;
    }
    rearm();
}

static mp_obj_t machine_reset(void) {
    c6_exit(EXIT_RESET);
}
static MP_DEFINE_CONST_FUN_OBJ_0(machine_reset_obj, machine_reset);

static mp_obj_t machine_soft_reset(void) {
    mp_raise_type(&mp_type_SystemExit);
}
static MP_DEFINE_CONST_FUN_OBJ_0(machine_soft_reset_obj, machine_soft_reset);

static mp_obj_t machine_bootloader(size_t n_args, const mp_obj_t *args) {
    c6_exit(EXIT_BOOTLOADER);
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(machine_bootloader_obj, 0, 1, machine_bootloader);

static mp_obj_t machine_unique_id(void) {
    return mp_obj_new_bytes((const byte *)c6_bootinfo.mac, 6);
}
static MP_DEFINE_CONST_FUN_OBJ_0(machine_unique_id_obj, machine_unique_id);

static mp_obj_t machine_reset_cause(void) {
    return MP_OBJ_NEW_SMALL_INT(c6_bootinfo.magic == BOOTINFO_MAGIC ? c6_bootinfo.reset_cause : 1);
}
static MP_DEFINE_CONST_FUN_OBJ_0(machine_reset_cause_obj, machine_reset_cause);

// freq(): the counted clock stays at the chip's 160 MHz figure; the setting is recorded only.
static mp_obj_t machine_freq(size_t n_args, const mp_obj_t *args) {
    if (n_args == 0) {
        return mp_obj_new_int_from_uint(cpu_hz);
    }
    mp_int_t mhz = mp_obj_get_int(args[0]) / 1000000;
    if (mhz != 20 && mhz != 40 && mhz != 80 && mhz != 160) {
        mp_raise_ValueError(MP_ERROR_TEXT("frequency must be 20MHz, 40MHz, 80Mhz or 160MHz"));
    }
    cpu_hz = mhz * 1000000;
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(machine_freq_obj, 0, 1, machine_freq);

static bool wake_any(void) {
    return true;
}

static mp_obj_t machine_idle(void) {
    clock_idle(UINT64_MAX, wake_any); // until the next interrupt
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_0(machine_idle_obj, machine_idle);

// _deepsleep(ms): idle in the deep-sleep state until the timer wakes the chip (ms <= 0: nothing wakes it).
static mp_obj_t machine_deepsleep(mp_obj_t ms_in) {
    mp_int_t ms = mp_obj_get_int(ms_in);
    clock_idle_state = C6_DEEPSLEEP;
    clock_idle(ms > 0 ? (uint64_t)ms * 1000000u : UINT64_MAX, NULL);
    c6_exit(EXIT_DEEPSLEEP);
}
static MP_DEFINE_CONST_FUN_OBJ_1(machine_deepsleep_obj, machine_deepsleep);

// _timer(id, period_us, periodic, callback, obj): arm hardware timer `id`; period_us < 0 disarms it.
static mp_obj_t machine_timer(size_t n_args, const mp_obj_t *args) {
    mp_int_t id = mp_obj_get_int(args[0]);
    if (id < 0 || id >= TIMER_COUNT) {
        mp_raise_ValueError(MP_ERROR_TEXT("invalid Timer number"));
    }
    mp_int_t period_us = mp_obj_get_int(args[1]);
    c6_timer_t *t = &timers[id];
    t->due_ns = 0;
    if (period_us >= 0) {
        MP_STATE_PORT(c6_timer_callback[id]) = args[3];
        MP_STATE_PORT(c6_timer_obj[id]) = args[4];
        t->period_ns = (uint64_t)(period_us > 0 ? period_us : 1) * 1000u;
        t->periodic = mp_obj_is_true(args[2]);
        t->due_ns = clock_chip_ns() + t->period_ns;
    }
    rearm();
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(machine_timer_obj, 5, 5, machine_timer);

// _wdt(timeout_ms): start the task watchdog or feed it (timeout_ms <= 0 feeds with the last timeout).
static mp_obj_t machine_wdt(mp_obj_t timeout_in) {
    mp_int_t ms = mp_obj_get_int(timeout_in);
    if (ms > 0) {
        wdt_timeout_ns = (uint64_t)ms * 1000000u;
    }
    if (wdt_timeout_ns) {
        wdt_due_ns = clock_chip_ns() + wdt_timeout_ns;
        rearm();
    }
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_1(machine_wdt_obj, machine_wdt);

// _rtc(seconds_since_1970=None): the RTC's time in ns, or set it.
static mp_obj_t machine_rtc(size_t n_args, const mp_obj_t *args) {
    if (n_args == 0 || args[0] == mp_const_none) {
        return mp_obj_new_int_from_ull(mp_hal_time_ns());
    }
    uint64_t ns = (uint64_t)mp_obj_get_int(args[0]) * 1000000000u;
    if (n_args > 1) {
        ns += (uint64_t)mp_obj_get_int(args[1]) * 1000u;
    }
    c6_rtc_offset_ns = ns - clock_chip_ns();
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(machine_rtc_obj, 0, 2, machine_rtc);

static const mp_rom_map_elem_t machine_module_globals_table[] = {
    { MP_ROM_QSTR(MP_QSTR___name__), MP_ROM_QSTR(MP_QSTR__c6machine) },
    C6_FUN(machine, reset),
    C6_FUN(machine, soft_reset),
    C6_FUN(machine, bootloader),
    C6_FUN(machine, unique_id),
    C6_FUN(machine, reset_cause),
    C6_FUN(machine, freq),
    C6_FUN(machine, idle),
    { MP_ROM_QSTR(MP_QSTR__deepsleep), MP_ROM_PTR(&machine_deepsleep_obj) },
    { MP_ROM_QSTR(MP_QSTR__timer), MP_ROM_PTR(&machine_timer_obj) },
    { MP_ROM_QSTR(MP_QSTR__wdt), MP_ROM_PTR(&machine_wdt_obj) },
    { MP_ROM_QSTR(MP_QSTR__rtc), MP_ROM_PTR(&machine_rtc_obj) },
};
C6_MODULE(MP_REGISTER_MODULE, _c6machine, machine_module_globals_table);
