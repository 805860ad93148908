// `_c6flash.Flash`: the flash's vfs partition (blockdev.c) as a block device of MicroPython's extended block
// protocol (readblocks/writeblocks with an offset, ioctl), in 4096-byte erase blocks as the esp32 port's
// esp32.Partition gives it to vfs.VfsLfs2. _boot.py mounts it at /.
#include <string.h>

#include "py/mperrno.h"
#include "py/runtime.h"
#include "extmod/vfs.h"
#include "blockdev.h"
#include "module.h"

typedef struct {
    mp_obj_base_t base;
} flash_obj_t;

static uint8_t sector[BLOCKDEV_SECTOR_SIZE];

static void check_range(uint32_t addr, size_t len) {
    if ((uint64_t)addr + len > (uint64_t)blockdev_blocks() * BLOCKDEV_BLOCK_SIZE) {
        mp_raise_OSError(MP_EINVAL);
    }
}

// Copy `len` bytes at flash address `addr` to or from `buf`, a 512-byte sector at a time (read-modify-write at
// unaligned ends); `write`: from `buf` to the flash. 0, or a negative errno.
static int transfer(uint32_t addr, uint8_t *buf, size_t len, bool write) {
    while (len) {
        uint32_t sec = addr / BLOCKDEV_SECTOR_SIZE, off = addr % BLOCKDEV_SECTOR_SIZE;
        size_t n = MIN(len, BLOCKDEV_SECTOR_SIZE - off);
        if (off == 0 && n == BLOCKDEV_SECTOR_SIZE) {
            if ((write ? blockdev_write(sec, buf, 1) : blockdev_read(sec, buf, 1)) != 0) {
                return -MP_EIO;
            }
        } else {
            if (blockdev_read(sec, sector, 1) != 0) {
                return -MP_EIO;
            }
            if (write) {
                memcpy(sector + off, buf, n);
                if (blockdev_write(sec, sector, 1) != 0) {
                    return -MP_EIO;
                }
            } else {
                memcpy(buf, sector + off, n);
            }
        }
        addr += n;
        buf += n;
        len -= n;
    }
    return 0;
}

static mp_obj_t blocks(size_t n_args, const mp_obj_t *args, bool write) {
    mp_buffer_info_t bufinfo;
    mp_get_buffer_raise(args[2], &bufinfo, write ? MP_BUFFER_READ : MP_BUFFER_WRITE);
    uint32_t addr = mp_obj_get_int(args[1]) * BLOCKDEV_BLOCK_SIZE + (n_args > 3 ? mp_obj_get_int(args[3]) : 0);
    check_range(addr, bufinfo.len);
    return MP_OBJ_NEW_SMALL_INT(transfer(addr, bufinfo.buf, bufinfo.len, write));
}

static mp_obj_t flash_readblocks(size_t n_args, const mp_obj_t *args) {
    return blocks(n_args, args, false);
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(flash_readblocks_obj, 3, 4, flash_readblocks);

static mp_obj_t flash_writeblocks(size_t n_args, const mp_obj_t *args) {
    return blocks(n_args, args, true);
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(flash_writeblocks_obj, 3, 4, flash_writeblocks);

// A NOR flash erase sets every bit of the 4 KB block to 1.
static int erase(uint32_t block) {
    memset(sector, 0xff, sizeof(sector));
    for (uint32_t s = 0; s < BLOCKDEV_BLOCK_SIZE / BLOCKDEV_SECTOR_SIZE; s++) {
        if (blockdev_write(block * (BLOCKDEV_BLOCK_SIZE / BLOCKDEV_SECTOR_SIZE) + s, sector, 1) != 0) {
            return -MP_EIO;
        }
    }
    return 0;
}

static mp_obj_t flash_ioctl(mp_obj_t self_in, mp_obj_t op_in, mp_obj_t arg_in) {
    switch (mp_obj_get_int(op_in)) {
        case MP_BLOCKDEV_IOCTL_INIT:
        case MP_BLOCKDEV_IOCTL_DEINIT:
        case MP_BLOCKDEV_IOCTL_SYNC:
            return MP_OBJ_NEW_SMALL_INT(0);
        case MP_BLOCKDEV_IOCTL_BLOCK_COUNT:
            return MP_OBJ_NEW_SMALL_INT(blockdev_blocks());
        case MP_BLOCKDEV_IOCTL_BLOCK_SIZE:
            return MP_OBJ_NEW_SMALL_INT(BLOCKDEV_BLOCK_SIZE);
        case MP_BLOCKDEV_IOCTL_BLOCK_ERASE: {
            mp_int_t block = mp_obj_get_int(arg_in);
            check_range(block * BLOCKDEV_BLOCK_SIZE, BLOCKDEV_BLOCK_SIZE);
            return MP_OBJ_NEW_SMALL_INT(erase(block));
        }
        default:
            return mp_const_none;
    }
}
static MP_DEFINE_CONST_FUN_OBJ_3(flash_ioctl_obj, flash_ioctl);

// Flash(): the one vfs partition (a block count of 0 when the board gave none)
static mp_obj_t flash_make_new(const mp_obj_type_t *type, size_t n_args, size_t n_kw, const mp_obj_t *args) {
    mp_arg_check_num(n_args, n_kw, 0, 0, false);
    static bool started;
    if (!started) {
        blockdev_init();
        started = true;
    }
    flash_obj_t *self = mp_obj_malloc(flash_obj_t, type);
    return MP_OBJ_FROM_PTR(self);
}

static const mp_rom_map_elem_t flash_locals_table[] = {
    C6_FUN(flash, readblocks),
    C6_FUN(flash, writeblocks),
    C6_FUN(flash, ioctl),
};
static MP_DEFINE_CONST_DICT(flash_locals_dict, flash_locals_table);

static MP_DEFINE_CONST_OBJ_TYPE(
    flash_type, MP_QSTR_Flash, MP_TYPE_FLAG_NONE,
    make_new, flash_make_new,
    locals_dict, &flash_locals_dict
    );

static const mp_rom_map_elem_t flash_module_globals_table[] = {
    { MP_ROM_QSTR(MP_QSTR___name__), MP_ROM_QSTR(MP_QSTR__c6flash) },
    { MP_ROM_QSTR(MP_QSTR_Flash), MP_ROM_PTR(&flash_type) },
};
C6_MODULE(MP_REGISTER_MODULE, _c6flash, flash_module_globals_table);
