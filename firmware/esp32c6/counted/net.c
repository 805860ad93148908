// The Wi-Fi's packet pipe: port 0 of a virtio console below the chip's console (console.c) (virtio-mmio, legacy, no MULTIPORT: queue 0 receives,
// queue 1 transmits). The pipe is a byte stream, so frames are cut from it here: received buffers are parsed in
// the device's interrupt into a small queue of datagrams, and given back to the device at once. What does not
// fit (the queue full, a frame over NET_MTU) is dropped, as a Wi-Fi stack drops what it has no buffer for.
// Sending is one frame at a time, waited for without counting: the wait is the host taking the bytes, as with
// the console (clock_stall_until).
#include <string.h>

#include "net.h"
#include "virt.h"
#include "virtio.h"

#define RX_BUFS    (4)
#define RX_BUF     (1024)
#define RX_FRAMES  (4)
#define HEADER     (8)

typedef struct {
    uint16_t len;
    uint16_t port;
    uint8_t ip[4];
    uint8_t data[NET_MTU];
} frame_t;

static virtq_ring_t rx_ring, tx_ring;
static virtq_t rxq, txq;
static uint32_t base;
uint32_t net_irq_source;
static uint8_t rx_bufs[RX_BUFS][RX_BUF];
static uint8_t tx_buf[HEADER + NET_MTU];

static frame_t frames[RX_FRAMES];
static volatile uint32_t rx_head, rx_tail; // frames[rx_tail..rx_head) are whole datagrams
// the frame being cut from the stream
static uint8_t header[HEADER];
static uint32_t header_got;
static uint32_t body_len, body_got;
static frame_t *filling; // NULL: the body is skipped (no room, or too long)

static void post_rx(uint16_t i) {
    virtq_post_write(&rxq, i, rx_bufs[i], RX_BUF);
}

bool net_init(void) {
    uint32_t slot;
    if (!virtio_find(VIRTIO_DEVICE_CONSOLE, VIRTIO_CONSOLE_SLOT, &slot)) {
        return false;
    }
    base = virtio_console_open(slot, &rxq, &rx_ring, &txq, &tx_ring);
    if (!base) {
        return false;
    }
    for (uint16_t i = 0; i < RX_BUFS; i++) {
        post_rx(i);
    }
    net_irq_source = VIRTIO_IRQ(slot);
    plic_enable(net_irq_source);
    return true;
}

bool net_up(void) {
    return base != 0;
}

static void commit(void) {
    if (filling) {
        rx_head = (rx_head + 1) % RX_FRAMES;
    }
    filling = NULL;
    header_got = 0;
}

static void cut(const uint8_t *p, uint32_t n) {
    while (n) {
        if (header_got < HEADER) {
            header[header_got++] = *p++;
            n--;
            if (header_got < HEADER) {
                continue;
            }
            body_len = (header[0] << 8) | header[1];
            body_got = 0;
            filling = NULL;
            if (body_len <= NET_MTU && (rx_head + 1) % RX_FRAMES != rx_tail) {
                filling = &frames[rx_head];
                filling->len = body_len;
                memcpy(filling->ip, header + 2, 4);
                filling->port = (header[6] << 8) | header[7];
            }
            if (body_len == 0) {
                commit();
            }
            continue;
        }
        uint32_t take = body_len - body_got < n ? body_len - body_got : n;
        if (filling) {
            memcpy(filling->data + body_got, p, take);
        }
        body_got += take;
        p += take;
        n -= take;
        if (body_got == body_len) {
            commit();
        }
    }
}

void net_irq(void) {
    virtio_ack(base);
    uint16_t head;
    uint32_t len;
    while (virtq_take(&rxq, &head, &len)) {
        if (head < RX_BUFS) {
            cut(rx_bufs[head], len <= RX_BUF ? len : RX_BUF);
            post_rx(head);
        }
    }
}

bool net_rx_any(void) {
    return rx_tail != rx_head;
}

int net_recv(uint8_t ip[4], uint16_t *port, uint8_t *buf, uint32_t cap) {
    if (rx_tail == rx_head) {
        return -1;
    }
    frame_t *f = &frames[rx_tail]; // the interrupt fills only frames[rx_head], never this one
    uint32_t n = f->len < cap ? f->len : cap;
    memcpy(buf, f->data, n);
    memcpy(ip, f->ip, 4);
    *port = f->port;
    int len = f->len;
    rx_tail = (rx_tail + 1) % RX_FRAMES;
    return len;
}

void net_rx_flush(void) {
    uint32_t state = irq_disable();
    rx_tail = rx_head;
    irq_restore(state);
}

static bool tx_done(void) {
    uint16_t head;
    uint32_t len;
    return virtq_take(&txq, &head, &len);
}

bool net_send(const uint8_t ip[4], uint16_t port, const void *buf, uint32_t len) {
    if (!base || len > NET_MTU) {
        return false;
    }
    tx_buf[0] = len >> 8;
    tx_buf[1] = len;
    memcpy(tx_buf + 2, ip, 4);
    tx_buf[6] = port >> 8;
    tx_buf[7] = port;
    memcpy(tx_buf + HEADER, buf, len);
    tx_ring.desc[0] = (virtq_desc_t) {(uint32_t)tx_buf, HEADER + len, 0, 0};
    virtq_submit(&txq, 0);
    clock_stall_until(tx_done);
    return true;
}
