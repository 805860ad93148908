// The flash's vfs partition as the board gives it: a virtio block device (virtio-mmio, legacy interface),
// polled. Sectors of 512 bytes; the filesystem works in 4096-byte blocks (the flash's erase size).
#include <stddef.h>

#include "blockdev.h"
#include "virtio.h"

static virtq_ring_t ring;
static virtq_t queue;
static uint32_t base;
static struct { uint32_t type; uint32_t reserved; uint64_t sector; } req;
static volatile uint8_t req_status;
static uint32_t sectors;

bool blockdev_init(void) {
    base = virtio_find(VIRTIO_DEVICE_BLOCK, VIRTIO_CONSOLE_SLOT, NULL);
    if (!base) {
        return false;
    }
    virtio_begin(base);
    if (!virtq_init(&queue, base, 0, &ring)) {
        base = 0;
        return false;
    }
    ring.avail_flags = VIRTQ_AVAIL_NO_IRQ; // polled
    virtio_ready(base);
    sectors = virtio_config32(base, 0); // capacity in 512-byte sectors (low word: the partition is < 2 TB)
    return true;
}

uint32_t blockdev_blocks(void) {
    return base ? sectors / (BLOCKDEV_BLOCK_SIZE / BLOCKDEV_SECTOR_SIZE) : 0;
}

static int transfer(uint32_t type, uint32_t sector, void *buf, uint32_t len) {
    if (!base) {
        return -1;
    }
    req.type = type;
    req.reserved = 0;
    req.sector = sector;
    req_status = 0xff;
    ring.desc[0] = (virtq_desc_t) {(uint32_t)&req, sizeof(req), VIRTQ_DESC_NEXT, 1};
    ring.desc[1] = (virtq_desc_t) {(uint32_t)buf, len, VIRTQ_DESC_NEXT | (type == 0 ? VIRTQ_DESC_WRITE : 0), 2};
    ring.desc[2] = (virtq_desc_t) {(uint32_t)&req_status, 1, VIRTQ_DESC_WRITE, 0};
    virtq_submit(&queue, 0);
    uint16_t head;
    uint32_t used;
    while (!virtq_take(&queue, &head, &used)) {
    }
    virtio_ack(base);
    __sync_synchronize();
    return req_status == 0 ? 0 : -1;
}

int blockdev_read(uint32_t sector, void *buf, uint32_t count) {
    return transfer(0, sector, buf, count * BLOCKDEV_SECTOR_SIZE);
}

int blockdev_write(uint32_t sector, const void *buf, uint32_t count) {
    return transfer(1, sector, (void *)buf, count * BLOCKDEV_SECTOR_SIZE);
}
