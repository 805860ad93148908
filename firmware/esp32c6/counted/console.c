// The console: port 0 of a virtio console (virtio-mmio, legacy, no MULTIPORT: queue 0 receives, queue 1
// transmits) in the highest virtio slot, the first device on the board's QEMU command line. Bytes move in
// packets of 64, as the chip's USB Serial/JTAG moves them (its bulk endpoints' packet size), and as the esp32
// port's UART interrupt moves a FIFO's worth at a time: the host pays per packet, not per byte (QEMU's 16550
// woke its main loop at every byte the firmware read, 10-24 us of host CPU a byte).
// Receiving: the device's interrupt copies each received packet into a ring buffer. When the ring has no room
// for a packet, the packets stay with the driver and are not given back to the device, so QEMU holds back the
// host's input (as USB flow control holds back the chip's console) instead of losing it; taking bytes from the
// ring copies them in again. Sending: each byte is stored into the packet (the chip stores each into its FIFO),
// and a full packet, or the end of a write, is handed over and waited for without counting: the wait is the
// host taking the bytes.
#include "py/mpconfig.h"
#include "py/runtime.h"
#include "shared/runtime/interrupt_char.h"
#include "virt.h"
#include "virtio.h"

#define PACKET     (64)
#define RX_PACKETS (VIRTQ_SIZE)
#define RX_SIZE    (1024) // the esp32 port's UART RX ring is of this order

static virtq_ring_t rx_ring, tx_ring;
static virtq_t rxq, txq;
static uint32_t base;
uint32_t console_irq_source;
static uint8_t rx_packets[RX_PACKETS][PACKET];
static uint8_t tx_packet[PACKET];
static uint32_t tx_len;

static uint8_t rx_buf[RX_SIZE];
static volatile uint32_t rx_head, rx_tail;
static volatile bool rx_held; // received packets wait with the driver: the ring had no room for them

static void post_rx(uint16_t i) {
    virtq_post_write(&rxq, i, rx_packets[i], PACKET);
}

bool console_init(void) {
    base = virtio_console_open(VIRTIO_CONSOLE_SLOT, &rxq, &rx_ring, &txq, &tx_ring);
    if (!base) {
        return false;
    }
    for (uint16_t i = 0; i < RX_PACKETS; i++) {
        post_rx(i);
    }
    console_irq_source = VIRTIO_IRQ(VIRTIO_CONSOLE_SLOT);
    plic_enable(console_irq_source);
    return true;
}

static uint32_t rx_room(void) {
    return (rx_tail + RX_SIZE - rx_head - 1) % RX_SIZE;
}

static void rx_store(const uint8_t *p, uint32_t n) {
    while (n--) {
        uint8_t c = *p++;
        if (c == mp_interrupt_char) {
            mp_sched_keyboard_interrupt();
            continue;
        }
        rx_buf[rx_head] = c;
        rx_head = (rx_head + 1) % RX_SIZE;
    }
}

// Copy received packets into the ring while it has room for a whole one, giving each back to the device.
static void rx_take_packets(void) {
    uint16_t head;
    uint32_t len;
    while (rx_room() >= PACKET) {
        if (!virtq_take(&rxq, &head, &len)) {
            rx_held = false;
            return;
        }
        if (head < RX_PACKETS) {
            rx_store(rx_packets[head], len <= PACKET ? len : PACKET);
            post_rx(head);
        }
    }
    rx_held = true;
}

// Called with the PLIC's claim taken (main.c).
void console_irq(void) {
    virtio_ack(base);
    rx_take_packets();
}

int console_rx_any(void) {
    return rx_head != rx_tail;
}

int console_rx_char(void) {
    if (rx_head == rx_tail) {
        return -1;
    }
    int c = rx_buf[rx_tail];
    rx_tail = (rx_tail + 1) % RX_SIZE;
    if (rx_held && rx_room() >= PACKET) { // room again: take what waited with the driver
        uint32_t state = irq_disable();
        rx_take_packets();
        irq_restore(state);
    }
    return c;
}

static bool tx_taken(void) {
    uint16_t head;
    uint32_t len;
    return virtq_take(&txq, &head, &len);
}

static void tx_flush(void) {
    tx_ring.desc[0] = (virtq_desc_t) {(uint32_t)tx_packet, tx_len, 0, 0};
    virtq_submit(&txq, 0);
    clock_stall_until(tx_taken);
    tx_len = 0;
}

void console_write(const char *buf, uint32_t len) {
    if (!base) {
        return;
    }
    while (len--) {
        tx_packet[tx_len++] = (uint8_t)*buf++;
        if (tx_len == PACKET) {
            tx_flush();
        }
    }
    if (tx_len) {
        tx_flush();
    }
}
