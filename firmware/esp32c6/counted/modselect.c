// `select`: poll() on streams (the console's sys.stdin above all); waiting idles the core (wfi) until the
// UART receives or the timeout passes on the counted clock.
#include "py/mphal.h"
#include "py/runtime.h"
#include "py/stream.h"
#include "module.h"
#include "virt.h"

#define POLLIN (MP_STREAM_POLL_RD)
#define POLLOUT (MP_STREAM_POLL_WR)
#define POLLERR (MP_STREAM_POLL_ERR)
#define POLLHUP (MP_STREAM_POLL_HUP)

typedef struct {
    mp_obj_base_t base;
    mp_map_t entries; // obj -> small int mask
    mp_obj_t ret_tuple; // ipoll's reused (obj, flags) tuple
    size_t iter_index;
    mp_int_t iter_count;
} poll_obj_t;

static uintptr_t poll_one(mp_obj_t obj, uintptr_t mask) {
    const mp_stream_p_t *stream = mp_get_stream_raise(obj, MP_STREAM_OP_IOCTL);
    int errcode;
    mp_uint_t ret = stream->ioctl(obj, MP_STREAM_POLL, mask | POLLERR | POLLHUP, &errcode);
    if (ret == MP_STREAM_ERROR) {
        return POLLERR;
    }
    return ret;
}

// How many registered objects are ready (their flags noted in `ready`, if given).
static mp_uint_t poll_all(poll_obj_t *self, uintptr_t *ready) {
    mp_uint_t n = 0;
    for (size_t i = 0; i < self->entries.alloc; i++) {
        if (!mp_map_slot_is_filled(&self->entries, i)) {
            continue;
        }
        uintptr_t flags = poll_one(self->entries.table[i].key, MP_OBJ_SMALL_INT_VALUE(self->entries.table[i].value));
        if (ready) {
            ready[i] = flags;
        }
        n += flags != 0;
    }
    return n;
}

static poll_obj_t *waiting;
static bool poll_wake(void) {
    return uart_rx_any() || MP_STATE_THREAD(mp_pending_exception) != MP_OBJ_NULL
           || MP_STATE_VM(sched_state) == MP_SCHED_PENDING || poll_all(waiting, NULL) > 0;
}

// Wait until something is ready or `timeout_ms` (-1: forever) passes; the count of ready objects.
static mp_uint_t poll_wait(poll_obj_t *self, mp_int_t timeout_ms) {
    uint64_t start = clock_chip_ns();
    for (;;) {
        mp_uint_t n = poll_all(self, NULL);
        if (n || timeout_ms == 0) {
            return n;
        }
        uint64_t left = UINT64_MAX;
        if (timeout_ms > 0) {
            uint64_t end = start + (uint64_t)timeout_ms * 1000000u;
            uint64_t now = clock_chip_ns();
            if (now >= end) {
                return 0;
            }
            left = end - now;
        }
        waiting = self;
        clock_idle(left, poll_wake);
        waiting = NULL;
        mp_handle_pending(MP_HANDLE_PENDING_CALLBACKS_AND_EXCEPTIONS);
    }
}

static mp_obj_t poll_register(size_t n_args, const mp_obj_t *args) {
    poll_obj_t *self = MP_OBJ_TO_PTR(args[0]);
    mp_uint_t mask = n_args == 3 ? mp_obj_get_int(args[2]) : POLLIN | POLLOUT;
    mp_map_lookup(&self->entries, args[1], MP_MAP_LOOKUP_ADD_IF_NOT_FOUND)->value = MP_OBJ_NEW_SMALL_INT(mask);
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(poll_register_obj, 2, 3, poll_register);

static mp_obj_t poll_unregister(mp_obj_t self_in, mp_obj_t obj) {
    poll_obj_t *self = MP_OBJ_TO_PTR(self_in);
    mp_map_lookup(&self->entries, obj, MP_MAP_LOOKUP_REMOVE_IF_FOUND);
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_2(poll_unregister_obj, poll_unregister);

static mp_obj_t poll_modify(mp_obj_t self_in, mp_obj_t obj, mp_obj_t mask) {
    poll_obj_t *self = MP_OBJ_TO_PTR(self_in);
    mp_map_elem_t *e = mp_map_lookup(&self->entries, obj, MP_MAP_LOOKUP);
    if (e == NULL) {
        mp_raise_OSError(MP_ENOENT);
    }
    e->value = MP_OBJ_NEW_SMALL_INT(mp_obj_get_int(mask));
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_3(poll_modify_obj, poll_modify);

static mp_int_t timeout_arg(size_t n_args, const mp_obj_t *args) {
    if (n_args < 2 || args[1] == mp_const_none) {
        return -1;
    }
    mp_int_t t = mp_obj_get_int(args[1]);
    return t < 0 ? -1 : t;
}

static mp_obj_t poll_poll(size_t n_args, const mp_obj_t *args) {
    poll_obj_t *self = MP_OBJ_TO_PTR(args[0]);
    mp_uint_t n = poll_wait(self, timeout_arg(n_args, args));
    mp_obj_t list = mp_obj_new_list(0, NULL);
    if (n == 0) {
        return list;
    }
    for (size_t i = 0; i < self->entries.alloc; i++) {
        if (!mp_map_slot_is_filled(&self->entries, i)) {
            continue;
        }
        mp_obj_t key = self->entries.table[i].key;
        uintptr_t flags = poll_one(key, MP_OBJ_SMALL_INT_VALUE(self->entries.table[i].value));
        if (flags) {
            mp_obj_t t[2] = {key, MP_OBJ_NEW_SMALL_INT(flags)};
            mp_obj_list_append(list, mp_obj_new_tuple(2, t));
        }
    }
    return list;
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(poll_poll_obj, 1, 3, poll_poll);

static mp_obj_t poll_ipoll(size_t n_args, const mp_obj_t *args) {
    poll_obj_t *self = MP_OBJ_TO_PTR(args[0]);
    if (self->ret_tuple == MP_OBJ_NULL) {
        self->ret_tuple = mp_obj_new_tuple(2, NULL);
    }
    self->iter_count = poll_wait(self, timeout_arg(n_args, args));
    self->iter_index = 0;
    return args[0];
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(poll_ipoll_obj, 1, 3, poll_ipoll);

static mp_obj_t poll_iternext(mp_obj_t self_in) {
    poll_obj_t *self = MP_OBJ_TO_PTR(self_in);
    while (self->iter_count > 0 && self->iter_index < self->entries.alloc) {
        size_t i = self->iter_index++;
        if (!mp_map_slot_is_filled(&self->entries, i)) {
            continue;
        }
        mp_obj_t key = self->entries.table[i].key;
        uintptr_t flags = poll_one(key, MP_OBJ_SMALL_INT_VALUE(self->entries.table[i].value));
        if (flags) {
            self->iter_count--;
            mp_obj_tuple_t *t = MP_OBJ_TO_PTR(self->ret_tuple);
            t->items[0] = key;
            t->items[1] = MP_OBJ_NEW_SMALL_INT(flags);
            return self->ret_tuple;
        }
    }
    return MP_OBJ_STOP_ITERATION;
}

static const mp_rom_map_elem_t poll_locals_table[] = {
    C6_FUN(poll, register),
    C6_FUN(poll, unregister),
    C6_FUN(poll, modify),
    C6_FUN(poll, poll),
    C6_FUN(poll, ipoll),
};
static MP_DEFINE_CONST_DICT(poll_locals_dict, poll_locals_table);

static MP_DEFINE_CONST_OBJ_TYPE(
    poll_type, MP_QSTR_poll, MP_TYPE_FLAG_ITER_IS_ITERNEXT,
    iter, poll_iternext, locals_dict, &poll_locals_dict);

static mp_obj_t select_poll(void) {
    poll_obj_t *p = mp_obj_malloc(poll_obj_t, &poll_type);
    mp_map_init(&p->entries, 0);
    p->ret_tuple = MP_OBJ_NULL;
    p->iter_count = 0;
    p->iter_index = 0;
    return MP_OBJ_FROM_PTR(p);
}
static MP_DEFINE_CONST_FUN_OBJ_0(select_poll_obj, select_poll);

static const mp_rom_map_elem_t select_module_globals_table[] = {
    { MP_ROM_QSTR(MP_QSTR___name__), MP_ROM_QSTR(MP_QSTR_select) },
    C6_FUN(select, poll),
    C6_INT(POLLIN),
    C6_INT(POLLOUT),
    C6_INT(POLLERR),
    C6_INT(POLLHUP),
};
C6_MODULE(MP_REGISTER_EXTENSIBLE_MODULE, select, select_module_globals_table);
