// The counted clock: the chip's time at 160 MHz, from QEMU's instruction count (-icount shift=0).
//
// QEMU counts 1 ns of virtual time per instruction and `mcycle` reads that virtual time. The ESP32-C6 runs
// one instruction per 6.25 ns cycle (160 MHz, CPI 1 assumed), so busy chip time = instructions x 6.25 ns.
// Idle time is spent in `wfi` on the CLINT timer; QEMU (sleep=on) lets virtual time pass at wall-clock rate
// then, so idle chip time = the virtual time that passed (1:1). A timed sleep that runs to its end, or that an
// alarm ends, is credited exactly the chip time up to its end; a timed wait that input ends is credited the time
// that passed, rounded up to a whole microsecond; a wait that only input ends (a blocking read) is credited
// nothing: the program takes its input at the counted time it asked for it, however long the host took to send
// it. So what a program does after its input arrived takes the same ticks on every run. Time is kept in quarter nanoseconds (one cycle = 25 of them) so nothing is rounded.
#include "virt.h"

#define CLINT_MTIMECMP (VIRT_CLINT_BASE + 0x4000u)
#define CLINT_MTIME    (VIRT_CLINT_BASE + 0xbff8u)
#define NS_PER_MTIME   (1000000000u / VIRT_MTIME_HZ)

#define Q_PER_NS (4u)
#define Q_PER_CYCLE (25u)
#define Q_PER_US (4000u)

static uint64_t idle_virt;     // virtual ns spent idle so far
static uint64_t idle_chip_q;   // chip time credited for idle so far, in quarter ns
static uint64_t idle_start_v;  // virtual ns when the current idle began
static bool idle_now;
static uint64_t idle_until_v;  // virtual ns the current idle ends at
static uint64_t alarm_ns;      // chip ns the alarm is due at (0: none)
static uint64_t alarm_fired_ns; // the due time of the alarm that fired during the current idle (0: none)
uint32_t clock_idle_state = C6_IDLE;

static inline uint64_t read_mcycle(void) {
    uint32_t hi, lo, hi2;
    do {
        __asm__ volatile ("csrr %0, mcycleh" : "=r" (hi));
        __asm__ volatile ("csrr %0, mcycle" : "=r" (lo));
        __asm__ volatile ("csrr %0, mcycleh" : "=r" (hi2));
    } while (hi != hi2);
    return ((uint64_t)hi << 32) | lo;
}

static inline void mie_set(uint32_t bits) {
    __asm__ volatile ("csrs mie, %0" :: "r" (bits));
}
static inline void mie_clear(uint32_t bits) {
    __asm__ volatile ("csrc mie, %0" :: "r" (bits));
}

static void set_mtimecmp(uint64_t value) {
    mmio_write32(CLINT_MTIMECMP + 4, 0xffffffffu);
    mmio_write32(CLINT_MTIMECMP, (uint32_t)value);
    mmio_write32(CLINT_MTIMECMP + 4, (uint32_t)(value >> 32));
}

static uint64_t busy_cycles_at(uint64_t v) {
    return (idle_now ? idle_start_v : v) - idle_virt;
}

static uint64_t chip_q_at(uint64_t v) {
    uint64_t q = busy_cycles_at(v) * Q_PER_CYCLE + idle_chip_q;
    return idle_now ? q + (v - idle_start_v) * Q_PER_NS : q;
}

static uint64_t chip_ns_at(uint64_t v) {
    return chip_q_at(v) / Q_PER_NS;
}

uint64_t clock_chip_ns(void) {
    return chip_ns_at(read_mcycle());
}

uint64_t clock_chip_q(void) {
    return chip_q_at(read_mcycle());
}

uint64_t clock_chip_cycles(void) {
    return chip_q_at(read_mcycle()) / Q_PER_CYCLE;
}

// One event on the ring at virtual time `v`: about ten stores, counted as the program's time like any other work.
static void log_event(uint64_t v) {
    uint32_t n = c6_status.events;
    volatile c6_event_t *e = &c6_events[n & (C6_EVENTS - 1u)];
    e->chip_q = chip_q_at(v);
    e->busy_cycles = busy_cycles_at(v);
    e->state = c6_status.state;
    e->gpio = c6_status.gpio;
    c6_status.events = n + 1; // after the event's fields (volatile stores stay in order)
}

static void clock_set_state(uint32_t state) {
    c6_status.state = state;
    log_event(read_mcycle());
}

static void calibrate_traps(void);

void clock_init(void) {
    calibrate_traps();
    c6_status.events = 0;
    c6_status.gpio = 0;
    c6_status.idle_end_q = UINT64_MAX;
    clock_set_state(C6_RUN);
    c6_status.magic = STATUS_MAGIC; // last: the board reads the ring from here on
}

void clock_gpio_write(uint32_t pin, bool level) {
    uint32_t bit = 1u << pin;
    uint32_t levels = c6_status.gpio;
    uint32_t next = level ? levels | bit : levels & ~bit;
    if (next != levels) {
        c6_status.gpio = next;
        log_event(read_mcycle());
    }
}

// The virtual ns at which the counted clock reaches `chip_ns` (busy: 6.25 chip ns per virtual ns).
static uint64_t virt_for(uint64_t chip_ns) {
    uint64_t v = read_mcycle();
    uint64_t now = chip_ns_at(v);
    if (chip_ns <= now) {
        return v;
    }
    uint64_t ahead = chip_ns - now;
    return v + (idle_now ? ahead : (ahead * 4 + 24) / 25);
}

// Point the CLINT at the earliest of the idle's end and the alarm; MTIE off when neither is pending.
static void program_timer(void) {
    uint64_t target = UINT64_MAX;
    if (idle_now) {
        target = idle_until_v;
    }
    if (alarm_ns) {
        uint64_t a = virt_for(alarm_ns);
        if (a < target) {
            target = a;
        }
    }
    if (target == UINT64_MAX) {
        mie_clear(MIE_MTIE);
        return;
    }
    set_mtimecmp((target + NS_PER_MTIME - 1) / NS_PER_MTIME);
    mie_set(MIE_MTIE);
}

void clock_set_alarm(uint64_t deadline_ns) {
    uint32_t state = irq_disable();
    alarm_ns = deadline_ns;
    program_timer();
    irq_restore(state);
}

// Interrupt handlers do not count as the program's busy time (what they cost depends on when input arrives).
uint64_t clock_irq_enter(void) {
    return read_mcycle();
}

// An interrupt is not the program's time: it comes when the host sends (the console, the Wi-Fi pipe), so none of its
// instructions count, its entry and exit (start.S, c6_trap) included. Those are outside the enter..exit window;
// trap_outside is their number, measured once at boot (calibrate_traps).
static uint32_t trap_outside;
static uint64_t last_inside; // instructions in the last interrupt's enter..exit window

void clock_irq_exit(uint64_t entered) {
    uint64_t inside = read_mcycle() - entered;
    last_inside = inside;
    if (!idle_now) {
        idle_virt += inside + trap_outside;
    }
}

// The instructions from reading the cycle count, through a store to `addr`, to reading it again.
static uint64_t __attribute__((noinline)) timed_store(volatile uint32_t *addr) {
    uint64_t before = read_mcycle();
    *addr = 1;
    return read_mcycle() - before;
}

// Measure trap_outside: the same store, once to the software interrupt's register (QEMU takes the interrupt right
// after it) and once to memory; the difference, less what the handler's window took, is an interrupt's entry and
// exit. Only the software interrupt is on during it, so nothing else comes.
static void calibrate_traps(void) {
    static volatile uint32_t sink;
    uint32_t old_mie;
    __asm__ volatile ("csrrw %0, mie, %1" : "=r" (old_mie) : "r" (MIE_MSIE));
    __asm__ volatile ("csrs mstatus, %0" :: "r" (MSTATUS_MIE));
    uint64_t with = UINT64_MAX, without = UINT64_MAX, inside = 0;
    for (int i = 0; i < 3; i++) { // the least of three: a cycle read that straddles a carry takes a few more
        uint64_t t = timed_store((volatile uint32_t *)VIRT_CLINT_MSIP);
        if (t < with) {
            with = t;
            inside = last_inside;
        }
        t = timed_store(&sink);
        if (t < without) {
            without = t;
        }
    }
    __asm__ volatile ("csrc mstatus, %0" :: "r" (MSTATUS_MIE));
    __asm__ volatile ("csrw mie, %0" :: "r" (old_mie));
    trap_outside = with > without + inside ? (uint32_t)(with - without - inside) : 0;
}

// Wait until `ready()` with interrupts held off, without counting the wait: it lasts as long as the host
// takes (the console's output), and the instructions around it are the same whether it waited or not.
void clock_stall_until(bool (*ready)(void)) {
    uint32_t state = irq_disable();
    uint64_t start = read_mcycle();
    while (!ready()) {
    }
    idle_virt += read_mcycle() - start;
    irq_restore(state);
}

// Stand the counted clock still from here to clock_stand_end: none of the instructions or time in between count
// (a wait for input: how long the host took to send it, and in how many pieces, is not the chip's). With an alarm
// armed the wait stays on the clock (the alarm must come due during it).
clock_stand_t clock_stand_begin(void) {
    uint32_t state = irq_disable();
    clock_stand_t mark = {read_mcycle(), idle_virt, idle_chip_q, alarm_ns == 0};
    irq_restore(state);
    return mark;
}

void clock_stand_end(clock_stand_t mark) {
    uint32_t state = irq_disable();
    if (mark.still && alarm_ns == 0) {
        idle_virt = mark.idle_virt + (read_mcycle() - mark.v);
        idle_chip_q = mark.idle_chip_q;
    }
    irq_restore(state);
}

// Round the clock up to a whole microsecond: done when input is taken, so what follows it runs on the
// same ticks whenever the input arrived.
void clock_align_us(void) {
    uint32_t state = irq_disable();
    uint64_t q = chip_q_at(read_mcycle());
    idle_chip_q += (Q_PER_US - q % Q_PER_US) % Q_PER_US;
    irq_restore(state);
}

void clock_timer_irq(void) {
    if (alarm_ns && clock_chip_ns() >= alarm_ns) {
        if (idle_now) {
            alarm_fired_ns = alarm_ns;
        }
        alarm_ns = 0;
        c6_alarm();
    }
    if (idle_now && read_mcycle() >= idle_until_v) {
        idle_until_v = UINT64_MAX; // the idle loop sees its end by the time; stop the interrupt
    }
    program_timer();
}

bool clock_idle(uint64_t chip_ns, bool (*wake)(void)) {
    return clock_idle_q(chip_ns == UINT64_MAX ? UINT64_MAX : chip_ns * Q_PER_NS, wake);
}

bool clock_idle_q(uint64_t chip_q, bool (*wake)(void)) {
    uint32_t state = irq_disable();
    uint64_t start = read_mcycle();
    uint64_t start_q = chip_q_at(start);
    uint64_t until = chip_q == UINT64_MAX ? UINT64_MAX : start + (chip_q + Q_PER_NS - 1) / Q_PER_NS;
    alarm_fired_ns = 0;
    uint64_t end_q = chip_q == UINT64_MAX ? UINT64_MAX : start_q + chip_q;
    if (alarm_ns && alarm_ns * Q_PER_NS < end_q) {
        end_q = alarm_ns * Q_PER_NS;
    }
    c6_status.idle_end_q = end_q;
    idle_start_v = start;
    idle_until_v = until;
    idle_now = true;
    c6_status.state = clock_idle_state;
    log_event(start);
    program_timer();
    bool early = false;
    for (;;) {
        if (wake && wake()) {
            early = true;
            break;
        }
        if (read_mcycle() >= until) {
            break;
        }
        __asm__ volatile ("wfi");
        irq_restore(MSTATUS_MIE); // take the pending interrupt (console, timer) here
        irq_disable();
    }
    uint64_t end = read_mcycle();
    idle_now = false;
    idle_virt += end - start;
    if (!early) {
        idle_chip_q += chip_q;
    } else if (alarm_fired_ns) { // ended by the alarm: exactly up to its due time
        uint64_t due_q = alarm_fired_ns * Q_PER_NS;
        uint64_t upto = due_q > start_q ? due_q - start_q : 0;
        idle_chip_q += upto < chip_q ? upto : chip_q;
    } else {
        if (chip_q != UINT64_MAX) { // a timed wait ended by input: the time that passed, to a whole us
            idle_chip_q += (end - start) * Q_PER_NS;
        } // else only input ends it: the clock stands still (the wall time the host took is not the chip's)
        uint64_t q = chip_q_at(end);
        idle_chip_q += (Q_PER_US - q % Q_PER_US) % Q_PER_US;
    }
    program_timer();
    clock_set_state(C6_RUN);
    irq_restore(state);
    return early;
}
