// The HAL: console I/O over the UART, ticks and delays on the counted clock (clock.c).
#include <string.h>

#include "py/mphal.h"
#include "py/runtime.h"
#include "py/stream.h"
#include "virt.h"

static bool events_pending(void) {
    return uart_rx_any() || MP_STATE_THREAD(mp_pending_exception) != MP_OBJ_NULL
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

// Idle until an event or `timeout_ms` (-1: no limit) of chip time has passed.
void c6_wfe(int timeout_ms) {
    if (!events_pending()) {
        clock_idle(timeout_ms < 0 ? UINT64_MAX : (uint64_t)timeout_ms * 1000000u, events_pending);
    }
}

// A byte of input, waiting for it with the counted clock standing still: the program takes it at the counted time it
// asked for it, however long the host took to send it and in how many pieces (docs/replay.md).
int mp_hal_stdin_rx_chr(void) {
    for (;;) {
        clock_stand_t mark = clock_stand_begin();
        int c;
        while ((c = uart_rx_char()) < 0 && !pending_non_input()) {
            c6_wait_events();
        }
        clock_stand_end(mark);
        if (c >= 0) {
            // on a whole microsecond: whether this byte was waited for or already there, what the program does
            // with it starts at the same phase of the clock (its ticks are the same on every run)
            clock_align_us();
            return c;
        }
        mp_handle_pending(MP_HANDLE_PENDING_CALLBACKS_AND_EXCEPTIONS);
    }
}

mp_uint_t mp_hal_stdout_tx_strn(const char *str, size_t len) {
    uart_write(str, len);
    return len;
}

uintptr_t mp_hal_stdio_poll(uintptr_t poll_flags) {
    uintptr_t ret = 0;
    if ((poll_flags & MP_STREAM_POLL_RD) && uart_rx_any()) {
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
        mp_handle_pending(MP_HANDLE_PENDING_CALLBACKS_AND_EXCEPTIONS);
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
