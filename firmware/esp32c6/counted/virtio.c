// The virtio-mmio legacy transport shared by the block device (the flash's vfs partition) and the two consoles
// (the chip's console; the Wi-Fi's packet pipe). Queues are polled or served from the device's interrupt by their drivers; this file only
// knows the registers and the rings.
#include <string.h>

#include "virt.h"
#include "virtio.h"

#define VIRTIO_MAGIC        (0x74726976u)
#define REG_MAGIC           (0x000)
#define REG_VERSION         (0x004)
#define REG_DEVICE_ID       (0x008)
#define REG_GUEST_FEATURES  (0x020)
#define REG_GUEST_PAGE_SIZE (0x028)
#define REG_QUEUE_SEL       (0x030)
#define REG_QUEUE_NUM_MAX   (0x034)
#define REG_QUEUE_NUM       (0x038)
#define REG_QUEUE_ALIGN     (0x03c)
#define REG_QUEUE_PFN       (0x040)
#define REG_QUEUE_NOTIFY    (0x050)
#define REG_INT_STATUS      (0x060)
#define REG_INT_ACK         (0x064)
#define REG_STATUS          (0x070)
#define REG_CONFIG          (0x100)
#define STATUS_ACK          (1)
#define STATUS_DRIVER       (2)
#define STATUS_DRIVER_OK    (4)

bool virtio_is(uint32_t base, uint32_t device_id) {
    return mmio_read32(base + REG_MAGIC) == VIRTIO_MAGIC && mmio_read32(base + REG_VERSION) == 1
           && mmio_read32(base + REG_DEVICE_ID) == device_id;
}

uint32_t virtio_find(uint32_t device_id, uint32_t slots, uint32_t *slot) {
    for (uint32_t i = 0; i < slots; i++) {
        uint32_t b = VIRT_MMIO_BASE + i * 0x1000u;
        if (virtio_is(b, device_id)) {
            if (slot) {
                *slot = i;
            }
            return b;
        }
    }
    return 0;
}

void virtio_begin(uint32_t base) {
    mmio_write32(base + REG_STATUS, 0);
    mmio_write32(base + REG_STATUS, STATUS_ACK);
    mmio_write32(base + REG_STATUS, STATUS_ACK | STATUS_DRIVER);
    mmio_write32(base + REG_GUEST_FEATURES, 0);
    mmio_write32(base + REG_GUEST_PAGE_SIZE, VIRTQ_PAGE);
}

bool virtq_init(virtq_t *q, uint32_t base, uint32_t index, virtq_ring_t *ring) {
    mmio_write32(base + REG_QUEUE_SEL, index);
    if (mmio_read32(base + REG_QUEUE_NUM_MAX) < VIRTQ_SIZE) {
        return false;
    }
    memset(ring, 0, sizeof(*ring));
    q->base = base;
    q->index = index;
    q->ring = ring;
    q->last_used = 0;
    mmio_write32(base + REG_QUEUE_NUM, VIRTQ_SIZE);
    mmio_write32(base + REG_QUEUE_ALIGN, VIRTQ_PAGE);
    mmio_write32(base + REG_QUEUE_PFN, (uint32_t)ring / VIRTQ_PAGE);
    return true;
}

void virtio_ready(uint32_t base) {
    mmio_write32(base + REG_STATUS, STATUS_ACK | STATUS_DRIVER | STATUS_DRIVER_OK);
}

uint32_t virtio_config32(uint32_t base, uint32_t offset) {
    return mmio_read32(base + REG_CONFIG + offset);
}

void virtq_submit(virtq_t *q, uint16_t head) {
    virtq_ring_t *r = q->ring;
    r->avail_ring[r->avail_idx % VIRTQ_SIZE] = head;
    __sync_synchronize();
    r->avail_idx++;
    __sync_synchronize();
    mmio_write32(q->base + REG_QUEUE_NOTIFY, q->index);
}

bool virtq_take(virtq_t *q, uint16_t *head, uint32_t *len) {
    virtq_ring_t *r = q->ring;
    if (r->used_idx == q->last_used) {
        return false;
    }
    __sync_synchronize();
    uint32_t i = q->last_used % VIRTQ_SIZE;
    *head = (uint16_t)r->used_ring[i].id;
    *len = r->used_ring[i].len;
    q->last_used++;
    return true;
}

void virtio_ack(uint32_t base) {
    mmio_write32(base + REG_INT_ACK, mmio_read32(base + REG_INT_STATUS));
}

uint32_t virtio_console_open(uint32_t slot, virtq_t *rxq, virtq_ring_t *rx_ring, virtq_t *txq, virtq_ring_t *tx_ring) {
    uint32_t base = VIRT_MMIO_BASE + slot * 0x1000u;
    if (!virtio_is(base, VIRTIO_DEVICE_CONSOLE)) {
        return 0;
    }
    virtio_begin(base);
    if (!virtq_init(rxq, base, 0, rx_ring) || !virtq_init(txq, base, 1, tx_ring)) {
        return 0;
    }
    tx_ring->avail_flags = VIRTQ_AVAIL_NO_IRQ; // sending is polled
    virtio_ready(base); // without MULTIPORT the device takes port 0 as open from here
    return base;
}

void virtq_post_write(virtq_t *q, uint16_t i, void *buf, uint32_t len) {
    q->ring->desc[i] = (virtq_desc_t) {(uint32_t)buf, len, VIRTQ_DESC_WRITE, 0};
    virtq_submit(q, i);
}
