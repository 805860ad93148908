// The flash's vfs partition as the board gives it: a virtio block device (virtio-mmio, legacy interface),
// polled. Sectors of 512 bytes; the filesystem works in 4096-byte blocks (the flash's erase size).
#include <string.h>

#include "blockdev.h"
#include "virt.h"

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
#define DEVICE_BLOCK        (2)
#define STATUS_ACK          (1)
#define STATUS_DRIVER       (2)
#define STATUS_DRIVER_OK    (4)
#define DESC_NEXT           (1)
#define DESC_WRITE          (2)
#define QSIZE               (4)
#define PAGE                (4096)

typedef struct {
    uint64_t addr;
    uint32_t len;
    uint16_t flags;
    uint16_t next;
} vring_desc_t;

typedef struct {
    vring_desc_t desc[QSIZE];
    uint16_t avail_flags;
    uint16_t avail_idx;
    uint16_t avail_ring[QSIZE];
    uint8_t pad[PAGE - QSIZE * sizeof(vring_desc_t) - 4 - 2 * QSIZE];
    uint16_t used_flags;
    volatile uint16_t used_idx;
    struct { uint32_t id; uint32_t len; } used_ring[QSIZE];
} vring_t;

static vring_t ring __attribute__((aligned(PAGE)));
static uint32_t base;
static uint16_t last_used;
static struct { uint32_t type; uint32_t reserved; uint64_t sector; } req;
static volatile uint8_t req_status;
static uint32_t sectors;

static uint32_t reg(uint32_t off) {
    return mmio_read32(base + off);
}
static void set_reg(uint32_t off, uint32_t value) {
    mmio_write32(base + off, value);
}

bool blockdev_init(void) {
    base = 0;
    for (uint32_t i = 0; i < VIRT_MMIO_SLOTS; i++) {
        uint32_t b = VIRT_MMIO_BASE + i * 0x1000u;
        if (mmio_read32(b + REG_MAGIC) == VIRTIO_MAGIC && mmio_read32(b + REG_VERSION) == 1
            && mmio_read32(b + REG_DEVICE_ID) == DEVICE_BLOCK) {
            base = b;
            break;
        }
    }
    if (!base) {
        return false;
    }
    set_reg(REG_STATUS, 0);
    set_reg(REG_STATUS, STATUS_ACK);
    set_reg(REG_STATUS, STATUS_ACK | STATUS_DRIVER);
    set_reg(REG_GUEST_FEATURES, 0);
    set_reg(REG_GUEST_PAGE_SIZE, PAGE);
    set_reg(REG_QUEUE_SEL, 0);
    if (reg(REG_QUEUE_NUM_MAX) < QSIZE) {
        base = 0;
        return false;
    }
    memset(&ring, 0, sizeof(ring));
    last_used = 0;
    set_reg(REG_QUEUE_NUM, QSIZE);
    set_reg(REG_QUEUE_ALIGN, PAGE);
    set_reg(REG_QUEUE_PFN, (uint32_t)&ring / PAGE);
    set_reg(REG_STATUS, STATUS_ACK | STATUS_DRIVER | STATUS_DRIVER_OK);
    sectors = reg(REG_CONFIG); // capacity in 512-byte sectors (low word: the partition is < 2 TB)
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
    ring.desc[0] = (vring_desc_t) {(uint32_t)&req, sizeof(req), DESC_NEXT, 1};
    ring.desc[1] = (vring_desc_t) {(uint32_t)buf, len, DESC_NEXT | (type == 0 ? DESC_WRITE : 0), 2};
    ring.desc[2] = (vring_desc_t) {(uint32_t)&req_status, 1, DESC_WRITE, 0};
    ring.avail_ring[ring.avail_idx % QSIZE] = 0;
    __sync_synchronize();
    ring.avail_idx++;
    __sync_synchronize();
    set_reg(REG_QUEUE_NOTIFY, 0);
    while (ring.used_idx == last_used) {
    }
    last_used = ring.used_idx;
    set_reg(REG_INT_ACK, reg(REG_INT_STATUS));
    __sync_synchronize();
    return req_status == 0 ? 0 : -1;
}

int blockdev_read(uint32_t sector, void *buf, uint32_t count) {
    return transfer(0, sector, buf, count * BLOCKDEV_SECTOR_SIZE);
}

int blockdev_write(uint32_t sector, const void *buf, uint32_t count) {
    return transfer(1, sector, (void *)buf, count * BLOCKDEV_SECTOR_SIZE);
}
