// The QEMU `virt` machine's devices this firmware uses, the board's exit codes, and the clock's interface.
#ifndef C6_VIRT_H
#define C6_VIRT_H

#include <stdbool.h>
#include <stdint.h>

#define VIRT_TEST_BASE   (0x00100000u) // sifive_test: a write ends QEMU (with -no-reboot) with an exit code
#define VIRT_CLINT_BASE  (0x02000000u)
#define VIRT_CLINT_MSIP  (VIRT_CLINT_BASE + 0x0u) // hart 0's software interrupt: clock.c's boot calibration
#define VIRT_PLIC_BASE   (0x0c000000u)
#define VIRT_MMIO_BASE   (0x10001000u) // virtio-mmio slots, 0x1000 apart
#define VIRT_MMIO_SLOTS  (8)
#define VIRT_MTIME_HZ    (10000000u)   // the CLINT's mtime counts QEMU virtual time at 10 MHz

// QEMU exit codes the board reads (the interface with bench/virtual/esp32c6)
#define EXIT_RESET       (8)  // machine.reset()
#define EXIT_BOOTLOADER  (9)  // machine.bootloader()
#define EXIT_WDT         (10) // the task watchdog was not fed
#define EXIT_DEEPSLEEP   (11) // the deep sleep's timer woke the chip
#define EXIT_PANIC       (12) // a CPU exception in the firmware

#define MCAUSE_INT       (0x80000000u)
#define IRQ_M_SOFT       (3)
#define IRQ_M_TIMER      (7)
#define IRQ_M_EXT        (11)
#define MIE_MSIE         (1u << IRQ_M_SOFT)
#define MIE_MTIE         (1u << IRQ_M_TIMER)
#define MIE_MEIE         (1u << IRQ_M_EXT)
#define MSTATUS_MIE      (1u << 3)

// What the board hands the firmware at boot (-device loader writes it before the CPU starts).
typedef struct {
    uint32_t magic;       // BOOTINFO_MAGIC when the board wrote it
    uint32_t reset_cause; // machine.reset_cause()
    uint8_t mac[8];       // base MAC (6 bytes used)
    uint32_t entropy[4];  // random bytes of the host, new at each boot (rng.c: the chip's hardware RNG)
} c6_bootinfo_t;
#define BOOTINFO_MAGIC (0x49423643u) // "C6BI"

// What the board may read while the guest runs (QMP `xp`): what the core is doing, and a ring of events, each the
// counted clock's time at a change of the core's state (running, idle) or of a GPIO's output level. The board turns
// the events into the supply's current on the counted clock (bench/virtual/esp32c6/supply.py).
typedef struct {
    uint32_t magic;        // STATUS_MAGIC
    uint32_t state;        // C6_RUN, C6_IDLE, C6_DEEPSLEEP
    uint64_t idle_end_q;   // while idle: the counted time (quarter ns) the idle ends by at the latest; UINT64_MAX
                           // when only input ends it (QEMU lets no time pass then: the counted clock stands still).
                           // Before `events`: a board that reads both at once never pairs an idle with a later end
    uint32_t events;       // events written so far; event n is c6_events[n % C6_EVENTS]
    uint32_t gpio;         // the output levels of GPIO0-30 (bit n: GPIOn)
} c6_status_t;
#define STATUS_MAGIC (0x54533643u) // "C6ST"
enum { C6_RUN = 0, C6_IDLE = 1, C6_DEEPSLEEP = 2 };

typedef struct {
    uint64_t chip_q;       // the counted clock at the event, in quarter nanoseconds
    uint64_t busy_cycles;  // instructions run by then (one 160 MHz cycle each)
    uint32_t state;        // the core's state from the event on
    uint32_t gpio;         // the GPIOs' output levels from the event on
} c6_event_t;
#define C6_EVENTS (2048u)  // the ring's length (a power of two); link.ld places it after the status block

extern volatile c6_bootinfo_t c6_bootinfo;
extern volatile c6_status_t c6_status;
extern volatile c6_event_t c6_events[C6_EVENTS];

static inline void mmio_write32(uint32_t addr, uint32_t value) {
    *(volatile uint32_t *)addr = value;
}
static inline uint32_t mmio_read32(uint32_t addr) {
    return *(volatile uint32_t *)addr;
}
static inline void mmio_write8(uint32_t addr, uint8_t value) {
    *(volatile uint8_t *)addr = value;
}
static inline uint8_t mmio_read8(uint32_t addr) {
    return *(volatile uint8_t *)addr;
}

// Interrupts off (the state before, for irq_restore) and back as they were.
static inline uint32_t irq_disable(void) {
    uint32_t old;
    __asm__ volatile ("csrrc %0, mstatus, %1" : "=r" (old) : "r" (MSTATUS_MIE));
    return old & MSTATUS_MIE;
}
static inline void irq_restore(uint32_t state) {
    if (state) {
        __asm__ volatile ("csrs mstatus, %0" :: "r" (MSTATUS_MIE));
    }
}

// clock.c: chip time at 160 MHz, counted (busy: instructions x 6.25 ns; idle: wall time of wfi)
void clock_init(void);
uint64_t clock_chip_ns(void);
uint64_t clock_chip_cycles(void);
// Idle until `chip_ns` more chip time has passed, or until `wake()` returns true (checked at every
// interrupt). Returns true when woken early. A full wait credits exactly `chip_ns` (deterministic).
bool clock_idle(uint64_t chip_ns, bool (*wake)(void));
// The same in the clock's own unit, quarter nanoseconds (clock_chip_q): a sleep that keeps its end in it ends on
// the same phase of the clock from any start, so a program's cycles around it do not depend on where it began.
bool clock_idle_q(uint64_t chip_q, bool (*wake)(void));
uint64_t clock_chip_q(void);
#define CLOCK_Q_PER_NS (4u)
// Set GPIO `pin`'s output level (an event on the ring when it changes).
void clock_gpio_write(uint32_t pin, bool level);
extern uint32_t clock_idle_state; // the state an idle is reported as (C6_IDLE, or C6_DEEPSLEEP)
void clock_timer_irq(void);
uint64_t clock_irq_enter(void);
void clock_irq_exit(uint64_t entered);
void clock_align_us(void);
// Stand the counted clock still over a wait for input (its instructions and time do not count); not while an alarm
// is armed
typedef struct {
    uint64_t v, idle_virt, idle_chip_q;
    bool still;
} clock_stand_t;
clock_stand_t clock_stand_begin(void);
void clock_stand_end(clock_stand_t mark);
void clock_stall_until(bool (*ready)(void));
// Run `cb` when the counted clock reaches `deadline_ns` (one slot, for machine.Timer/WDT); 0 cancels.
void clock_set_alarm(uint64_t deadline_ns);
extern void c6_alarm(void); // modmachine.c: the alarm fired (interrupt context)

// main.c: the PLIC, context 0 (machine mode of hart 0): turn source `irq` on (priority 1) and take it in c6_trap
void plic_enable(uint32_t irq);

// console.c: the chip's console (a virtio console in packets of 64 bytes), interrupt driven receive
bool console_init(void); // false: the board gave no console (output is dropped)
void console_write(const char *buf, uint32_t len);
int console_rx_any(void);
int console_rx_char(void); // -1 when empty
void console_irq(void);    // the device's interrupt (PLIC source console_irq_source)
extern uint32_t console_irq_source;

// main.c
__attribute__((noreturn)) void c6_exit(uint32_t code);

#endif
