// Boot, the REPL loop with soft reset, traps, and the garbage collector's roots.
#include <stdio.h>
#include <string.h>

#include "py/builtin.h"
#include "py/compile.h"
#include "py/cstack.h"
#include "py/gc.h"
#include "py/mperrno.h"
#include "py/mphal.h"
#include "py/runtime.h"
#include "py/stackctrl.h"
#include "shared/readline/readline.h"
#include "shared/runtime/gchelper.h"
#include "shared/runtime/pyexec.h"
#include "net.h"
#include "virt.h"

__attribute__((section(".info.boot"))) volatile c6_bootinfo_t c6_bootinfo;
__attribute__((section(".info.status"))) volatile c6_status_t c6_status;
__attribute__((section(".info.events"))) volatile c6_event_t c6_events[C6_EVENTS];

extern uint32_t _sstack, _estack;
static uint8_t heap[MICROPY_HEAP_SIZE] __attribute__((aligned(16)));

void c6_machine_soft_reset_deinit(void); // modmachine.c

__attribute__((noreturn)) void c6_exit(uint32_t code) {
    mmio_write32(VIRT_TEST_BASE, (code << 16) | 0x3333u);
    for (;;) {
        __asm__ volatile ("wfi");
    }
}

#define PLIC_PRIORITY(irq) (VIRT_PLIC_BASE + 4u * (irq))
#define PLIC_ENABLE_CTX0   (VIRT_PLIC_BASE + 0x2000u)
#define PLIC_THRESHOLD0    (VIRT_PLIC_BASE + 0x200000u)
#define PLIC_CLAIM0        (VIRT_PLIC_BASE + 0x200004u)

void plic_enable(uint32_t irq) {
    mmio_write32(PLIC_PRIORITY(irq), 1);
    mmio_write32(PLIC_ENABLE_CTX0, mmio_read32(PLIC_ENABLE_CTX0) | (1u << irq));
    mmio_write32(PLIC_THRESHOLD0, 0);
    __asm__ volatile ("csrs mie, %0" :: "r" (MIE_MEIE));
}

// Serve every source the PLIC holds pending: the console, the Wi-Fi's pipe.
static void external_irq(void) {
    uint32_t irq;
    while ((irq = mmio_read32(PLIC_CLAIM0)) != 0) {
        if (irq == console_irq_source) {
            console_irq();
        } else if (irq == net_irq_source) {
            net_irq();
        }
        mmio_write32(PLIC_CLAIM0, irq);
    }
}

void c6_trap(uint32_t mcause, uint32_t mepc) {
    if (mcause & MCAUSE_INT) {
        uint64_t entered = clock_irq_enter();
        uint32_t code = mcause & ~MCAUSE_INT;
        if (code == IRQ_M_TIMER) {
            clock_timer_irq();
        } else if (code == IRQ_M_EXT) {
            external_irq();
        } else if (code == IRQ_M_SOFT) { // clock.c's boot calibration of an interrupt's cost
            mmio_write32(VIRT_CLINT_MSIP, 0);
        }
        clock_irq_exit(entered);
        return;
    }
    uint32_t mtval;
    __asm__ volatile ("csrr %0, mtval" : "=r" (mtval));
    mp_printf(&mp_plat_print, "Guru Meditation Error: Core  0 panic'ed (exception %u). "
        "MEPC: 0x%08x MTVAL: 0x%08x\n\nRebooting...\n", (unsigned)mcause, (unsigned)mepc, (unsigned)mtval);
    c6_exit(EXIT_PANIC);
}

int c6_main(void) {
    console_init();
    clock_init(); // the status block's magic
    __asm__ volatile ("csrs mstatus, %0" :: "r" (MSTATUS_MIE));
    net_init(); // no pipe: the board has no Wi-Fi (sendto raises EHOSTUNREACH)
soft_reset:
    mp_cstack_init_with_top(&_estack, (char *)&_estack - (char *)&_sstack);
    gc_init(heap, heap + sizeof(heap));
    mp_init();
    readline_init0();
    mp_obj_list_append(mp_sys_path, mp_obj_new_str("/lib", 4)); // after '' and '.frozen'
    pyexec_frozen_module("_boot.py", false); // mounts the flash's filesystem (no partition: none)
    pyexec_file_if_exists("boot.py");
    if (pyexec_mode_kind == PYEXEC_MODE_FRIENDLY_REPL) {
        int ret = pyexec_file_if_exists("main.py");
        if (ret & PYEXEC_FORCED_EXIT) {
            goto soft_reset_exit;
        }
    }
    for (;;) {
        if (pyexec_mode_kind == PYEXEC_MODE_RAW_REPL) {
            if (pyexec_raw_repl() != 0) {
                break;
            }
        } else {
            if (pyexec_friendly_repl() != 0) {
                break;
            }
        }
    }
soft_reset_exit:
    mp_printf(&mp_plat_print, "MPY: soft reboot\n");
    c6_machine_soft_reset_deinit();
    gc_sweep_all();
    mp_deinit();
    goto soft_reset;
}

void gc_collect(void) {
    gc_collect_start();
    gc_helper_collect_regs_and_stack();
    gc_collect_end();
}

void nlr_jump_fail(void *val) {
    mp_printf(&mp_plat_print, "FATAL: uncaught exception %p\n", val);
    c6_exit(EXIT_PANIC);
}

void __assert_func(const char *file, int line, const char *func, const char *expr) {
    mp_printf(&mp_plat_print, "Assertion '%s' failed, at file %s:%d\n", expr, file, line);
    c6_exit(EXIT_PANIC);
}


