// The console: the virt machine's 16550 UART, receive by interrupt (PLIC source 10) into a ring buffer.
#include "py/mpconfig.h"
#include "py/runtime.h"
#include "shared/runtime/interrupt_char.h"
#include "virt.h"

#define UART_RBR (VIRT_UART0_BASE + 0)
#define UART_THR (VIRT_UART0_BASE + 0)
#define UART_IER (VIRT_UART0_BASE + 1)
#define UART_FCR (VIRT_UART0_BASE + 2)
#define UART_LCR (VIRT_UART0_BASE + 3)
#define UART_MCR (VIRT_UART0_BASE + 4)
#define UART_LSR (VIRT_UART0_BASE + 5)
#define LSR_DR   (0x01)
#define LSR_THRE (0x20)

#define RX_SIZE (1024) // the esp32 port's UART RX ring is of this order
static uint8_t rx_buf[RX_SIZE];
static volatile uint32_t rx_head, rx_tail;
static volatile bool rx_paused; // the receive interrupt is off while the ring is full

static void rx_store(uint8_t c) {
    uint32_t next = (rx_head + 1) % RX_SIZE;
    if (next != rx_tail) { // full: the byte is lost, as on a UART whose buffer overflows
        rx_buf[rx_head] = c;
        rx_head = next;
    }
}

void uart_init(void) {
    // divisor 1: QEMU's fastest line rate (399,193 baud on `virt`), which sets only its receive timeout, 4
    // character times (100 us): QEMU does not pace the bytes themselves
    mmio_write8(UART_LCR, 0x83); // DLAB
    mmio_write8(UART_RBR, 0x01); // divisor latch low
    mmio_write8(UART_IER, 0x00); // divisor latch high
    mmio_write8(UART_LCR, 0x03); // 8N1
    // FIFOs on, interrupt at 14 bytes or the receive timeout: QEMU hands over up to 14 bytes a time, instead of
    // one byte per trip through its main loop (idle waits for the next byte are counted at the host's pace, so
    // reading a line cost 4 us of counted time a byte under load). Turning them on clears the receiver, so this
    // is done before the status block says the firmware runs (clock_init, after this): the board holds the
    // host's input back until then (bench.virtual.esp32c6.core).
    mmio_write8(UART_FCR, 0xc7); // enable, clear both, trigger level 14
    mmio_write8(UART_MCR, 0x0b); // DTR, RTS, OUT2 (interrupts out)
    mmio_write8(UART_IER, 0x01); // receive data available
    plic_enable(VIRT_UART0_IRQ);
}

// The transmitter is full only while the host has not taken QEMU's output yet: that wait depends on the
// host, so it is not counted as the program's time (the board paces the wire itself).
static bool tx_ready(void) {
    return mmio_read8(UART_LSR) & LSR_THRE;
}

void uart_write(const char *buf, uint32_t len) {
    while (len--) {
        clock_stall_until(tx_ready);
        mmio_write8(UART_THR, (uint8_t)*buf++);
    }
}

int uart_rx_any(void) {
    return rx_head != rx_tail;
}

int uart_rx_char(void) {
    if (rx_head == rx_tail) {
        return -1;
    }
    int c = rx_buf[rx_tail];
    rx_tail = (rx_tail + 1) % RX_SIZE;
    if (rx_paused) {
        rx_paused = false;
        mmio_write8(UART_IER, 0x01); // room again: take what waited in the UART
    }
    return c;
}

// Received bytes go to the ring; when it is full the receive interrupt is turned off and the bytes wait in
// the UART, so QEMU holds back the host's input (as USB flow control holds back the chip's console) instead
// of losing it. Taking a byte from the ring turns the interrupt back on. Called with the PLIC's claim taken
// (main.c).
void uart_irq(void) {
    while (mmio_read8(UART_LSR) & LSR_DR) {
        if ((rx_head + 1) % RX_SIZE == rx_tail) {
            rx_paused = true;
            mmio_write8(UART_IER, 0x00);
            break;
        }
        uint8_t c = mmio_read8(UART_RBR);
        if (c == mp_interrupt_char) {
            mp_sched_keyboard_interrupt();
            continue;
        }
        rx_store(c);
    }
}
