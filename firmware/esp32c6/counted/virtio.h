// virtio-mmio devices of the `virt` machine, legacy interface (version 1), as the board gives them: found by
// device id among the slots, no features negotiated, split queues with the legacy page-aligned layout.
#ifndef C6_VIRTIO_H
#define C6_VIRTIO_H
#include <stdbool.h>
#include <stdint.h>

#include "virt.h"

#define VIRTIO_DEVICE_CONSOLE (3)
#define VIRTIO_DEVICE_BLOCK   (2)
#define VIRTQ_SIZE            (8)
#define VIRTQ_PAGE            (4096)
#define VIRTQ_DESC_NEXT       (1)
#define VIRTQ_DESC_WRITE      (2) // the device writes the buffer
#define VIRTQ_AVAIL_NO_IRQ    (1) // the driver polls this queue: no interrupt for its used buffers

typedef struct {
    uint64_t addr;
    uint32_t len;
    uint16_t flags;
    uint16_t next;
} virtq_desc_t;

// The legacy layout: descriptors and the available ring, then the used ring on the next page.
typedef struct {
    virtq_desc_t desc[VIRTQ_SIZE];
    uint16_t avail_flags;
    uint16_t avail_idx;
    uint16_t avail_ring[VIRTQ_SIZE];
    uint8_t pad[VIRTQ_PAGE - VIRTQ_SIZE * sizeof(virtq_desc_t) - 4 - 2 * VIRTQ_SIZE];
    uint16_t used_flags;
    volatile uint16_t used_idx;
    struct { uint32_t id; uint32_t len; } used_ring[VIRTQ_SIZE];
} __attribute__((aligned(VIRTQ_PAGE))) virtq_ring_t;

typedef struct {
    uint32_t base;       // the device's registers
    uint32_t index;      // the queue's number on the device
    virtq_ring_t *ring;
    uint16_t last_used;  // the used entries taken so far
} virtq_t;

// QEMU gives -device's virtio-mmio slots from the top: the board puts the chip's console first on its command
// line, so it is in the highest slot, and the other devices below it.
#define VIRTIO_CONSOLE_SLOT   (VIRT_MMIO_SLOTS - 1)
#define VIRTIO_IRQ(slot)      ((slot) + 1) // virtio-mmio slot i raises PLIC source i + 1 on `virt`
// Whether the slot at `base` holds a device with `device_id`.
bool virtio_is(uint32_t base, uint32_t device_id);
// The base of the first device with `device_id` among the lowest `slots` slots (0: none) and its slot (its PLIC
// source is slot + 1).
uint32_t virtio_find(uint32_t device_id, uint32_t slots, uint32_t *slot);
// Reset the device and acknowledge it, taking none of its features.
void virtio_begin(uint32_t base);
// Give the device queue `index` in `ring` (false: the device's queue is smaller than VIRTQ_SIZE).
bool virtq_init(virtq_t *q, uint32_t base, uint32_t index, virtq_ring_t *ring);
// The driver is set up: the device may use its queues.
void virtio_ready(uint32_t base);
uint32_t virtio_config32(uint32_t base, uint32_t offset);
// Make the chain starting at descriptor `head` available and tell the device.
void virtq_submit(virtq_t *q, uint16_t head);
// Take the next used entry (its head descriptor and the bytes the device wrote); false when none is new.
bool virtq_take(virtq_t *q, uint16_t *head, uint32_t *len);
// Acknowledge the device's interrupt (it stays raised until acknowledged).
void virtio_ack(uint32_t base);
// Open port 0 of the virtio console in `slot` (legacy, no MULTIPORT): queue 0 receives, with an interrupt for its
// used buffers; queue 1 sends, polled. Its base (0: the slot holds no console, or its queues are too small).
uint32_t virtio_console_open(uint32_t slot, virtq_t *rxq, virtq_ring_t *rx_ring, virtq_t *txq, virtq_ring_t *tx_ring);
// Give descriptor `i` of `q`, `len` bytes at `buf` for the device to write, to the device.
void virtq_post_write(virtq_t *q, uint16_t i, void *buf, uint32_t len);
#endif
