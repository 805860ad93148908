// The HAL: console I/O (console.c), ticks and delays on the counted clock (clock.c).
#include <string.h>

#include "py/mphal.h"
#include "py/runtime.h"
#include "py/stream.h"
#include "lib/oofatfs/ff.h"
#include "shared/timeutils/timeutils.h"
#include "net.h"
#include "virt.h"

static bool events_pending(void) {
    return console_rx_any() || MP_STATE_THREAD(mp_pending_exception) != MP_OBJ_NULL
           #if MICROPY_ENABLE_SCHEDULER
           || MP_STATE_VM(sched_state) == MP_SCHED_PENDING
           #endif
    ;
}

static bool pending_non_input(void) {
    return MP_STATE_THREAD(mp_pending_exception) != MP_OBJ_NULL
           #if MICROPY_ENABLE_SCHEDULER
           || MP_STATE_VM(sched_state) == MP_SCHED_PENDING
           #endif
    ;
}

// Idle until input, an exception or a scheduled callback is pending (the REPL waiting for a key).
void c6_wait_events(void) {
    if (!events_pending()) {
        clock_idle(UINT64_MAX, events_pending);
    }
}

// What ends a wait for any event (select.poll, asyncio): input, a datagram, an exception or a callback.
static bool any_event(void) {
    return events_pending() || net_rx_any();
}

// Idle until an event, `timeout_ms` (-1: no limit) of chip time or one FreeRTOS tick has passed, whichever
// comes first: the esp32 port's event hook waits a tick at most (ulTaskNotifyTake(pdFALSE, 1)), so what
// select.poll waits on without an interrupt (a Python object's ioctl) is polled again every tick.
#define RTOS_TICK_MS (10) // CONFIG_FREERTOS_HZ=100, ESP-IDF's default, which the esp32 port keeps
void c6_wfe(int timeout_ms) {
    if (!any_event()) {
        uint32_t ms = timeout_ms < 0 || timeout_ms > RTOS_TICK_MS ? RTOS_TICK_MS : (uint32_t)timeout_ms;
        clock_idle((uint64_t)ms * 1000000u, any_event);
    }
}

// A byte of input, waiting for it with the counted clock standing still: the program takes it at the counted time it
// asked for it, however long the host took to send it and in how many pieces (docs/replay.md).
int mp_hal_stdin_rx_chr(void) {
    for (;;) {
        clock_stand_t mark = clock_stand_begin();
        int c;
        while ((c = console_rx_char()) < 0 && !pending_non_input()) {
            c6_wait_events();
        }
        clock_stand_end(mark);
        if (c >= 0) {
            // on a whole microsecond: whether this byte was waited for or already there, what the program does
            // with it starts at the same phase of the clock (its ticks are the same on every run)
            clock_align_us();
            return c;
        }
        mp_handle_pending(true);
    }
}

mp_uint_t mp_hal_stdout_tx_strn(const char *str, size_t len) {
    console_write(str, len);
    return len;
}

uintptr_t mp_hal_stdio_poll(uintptr_t poll_flags) {
    uintptr_t ret = 0;
    if ((poll_flags & MP_STREAM_POLL_RD) && console_rx_any()) {
        ret |= MP_STREAM_POLL_RD;
    }
    if (poll_flags & MP_STREAM_POLL_WR) {
        ret |= MP_STREAM_POLL_WR;
    }
    return ret;
}

mp_uint_t mp_hal_ticks_ms(void) {
    return (mp_uint_t)(clock_chip_ns() / 1000000u);
}

mp_uint_t mp_hal_ticks_us(void) {
    return (mp_uint_t)(clock_chip_ns() / 1000u);
}

mp_uint_t mp_hal_ticks_cpu(void) {
    return (mp_uint_t)clock_chip_cycles();
}

// The RTC counts from the epoch the board sets (machine.RTC); modmachine.c keeps the offset.
extern uint64_t c6_rtc_offset_ns;
uint64_t mp_hal_time_ns(void) {
    return c6_rtc_offset_ns + clock_chip_ns();
}

// Sleep `ns` of chip time: idle in wfi; callbacks and Ctrl-C end the idle early, run, and the sleep goes on.
// The end is kept in the clock's quarter nanoseconds: in whole ns the credited time depended on the clock's phase
// at the call (where the last input wait ended), and a program's cycles across a sleep moved by one between boots.
static void sleep_ns(uint64_t ns) {
    uint64_t end = clock_chip_q() + ns * CLOCK_Q_PER_NS;
    for (;;) {
        mp_handle_pending(true);
        uint64_t now = clock_chip_q();
        if (now >= end) {
            return;
        }
        clock_idle_q(end - now, pending_non_input);
    }
}

void mp_hal_delay_ms(mp_uint_t ms) {
    sleep_ns((uint64_t)ms * 1000000u);
}

void mp_hal_delay_us(mp_uint_t us) {
    sleep_ns((uint64_t)us * 1000u);
}

// FAT's timestamps (oofatfs, for vfs.VfsFat): the RTC's time, in FAT's packed date and time.
DWORD get_fattime(void) {
    timeutils_struct_time_t tm;
    timeutils_seconds_since_epoch_to_struct_time(mp_hal_time_ns() / 1000000000u, &tm);
    return ((DWORD)(tm.tm_year - 1980) << 25) | ((DWORD)tm.tm_mon << 21) | ((DWORD)tm.tm_mday << 16)
           | ((DWORD)tm.tm_hour << 11) | ((DWORD)tm.tm_min << 5) | ((DWORD)tm.tm_sec / 2);
}
