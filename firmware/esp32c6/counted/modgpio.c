// `_c6gpio.Pin`: machine.Pin of MicroPython's esp32 port for the C6's GPIOs, in C so that a write costs what the
// chip's would (a call into C, a register store). Nothing is wired to an input, so an input reads its pull. An
// output's level is the clock's (clock_gpio_write): each change is an event on the status block's ring with its
// counted time, which the board hands to its PPK2's logic inputs.
#include "py/runtime.h"
#include "module.h"
#include "virt.h"

#define FLASH_FIRST (24) // GPIO24-30 are the in-package flash's SPI pins

enum { IN = 1, OUT = 3, OPEN_DRAIN = 7, PULL_DOWN = 1, PULL_UP = 2 };
enum { IRQ_RISING = 1, IRQ_FALLING = 2, WAKE_LOW = 4, WAKE_HIGH = 5, DRIVE_0 = 0, DRIVE_1, DRIVE_2, DRIVE_3 };

typedef struct {
    mp_obj_base_t base;
    uint8_t id;
    uint8_t mode;
    uint8_t pull; // 0: none
} gpio_pin_obj_t;

static bool level_of(uint32_t id) {
    return (c6_status.gpio >> id) & 1u;
}

static mp_obj_t pin_init_helper(gpio_pin_obj_t *self, size_t n_args, const mp_obj_t *pos, mp_map_t *kw) {
    enum { ARG_mode, ARG_pull, ARG_value, ARG_drive, ARG_hold };
    static const mp_arg_t allowed[] = {
        { MP_QSTR_mode, MP_ARG_OBJ, {.u_obj = MP_OBJ_NEW_SMALL_INT(-1)} },
        { MP_QSTR_pull, MP_ARG_OBJ, {.u_obj = MP_OBJ_NEW_SMALL_INT(-1)} },
        { MP_QSTR_value, MP_ARG_KW_ONLY | MP_ARG_OBJ, {.u_obj = mp_const_none} },
        { MP_QSTR_drive, MP_ARG_KW_ONLY | MP_ARG_OBJ, {.u_obj = mp_const_none} },
        { MP_QSTR_hold, MP_ARG_KW_ONLY | MP_ARG_OBJ, {.u_obj = mp_const_none} },
    };
    mp_arg_val_t args[MP_ARRAY_SIZE(allowed)];
    mp_arg_parse_all(n_args, pos, kw, MP_ARRAY_SIZE(allowed), allowed, args);
    mp_obj_t mode = args[ARG_mode].u_obj;
    if (mode != MP_OBJ_NEW_SMALL_INT(-1)) {
        mp_int_t m = mode == mp_const_none ? IN : mp_obj_get_int(mode);
        if (m != IN && m != OUT && m != OPEN_DRAIN) {
            mp_raise_ValueError(MP_ERROR_TEXT("invalid pin mode"));
        }
        self->mode = m;
    }
    mp_obj_t pull = args[ARG_pull].u_obj;
    if (pull != MP_OBJ_NEW_SMALL_INT(-1)) {
        mp_int_t p = pull == mp_const_none ? 0 : mp_obj_get_int(pull);
        if (p != 0 && p != PULL_UP && p != PULL_DOWN) {
            mp_raise_ValueError(MP_ERROR_TEXT("invalid pull"));
        }
        self->pull = p;
    }
    mp_obj_t drive = args[ARG_drive].u_obj;
    if (drive != mp_const_none && (mp_obj_get_int(drive) < 0 || mp_obj_get_int(drive) > 3)) {
        mp_raise_ValueError(MP_ERROR_TEXT("bad drive strength"));
    }
    if (args[ARG_value].u_obj != mp_const_none) {
        clock_gpio_write(self->id, mp_obj_is_true(args[ARG_value].u_obj));
    }
    return mp_const_none;
}

static mp_obj_t pin_make_new(const mp_obj_type_t *type, size_t n_args, size_t n_kw, const mp_obj_t *args) {
    mp_arg_check_num(n_args, n_kw, 1, MP_OBJ_FUN_ARGS_MAX, true);
    mp_int_t id = mp_obj_is_small_int(args[0]) ? MP_OBJ_SMALL_INT_VALUE(args[0]) : -1;
    if (id < 0 || id >= FLASH_FIRST) {
        mp_raise_ValueError(MP_ERROR_TEXT("invalid pin"));
    }
    gpio_pin_obj_t *self = mp_obj_malloc(gpio_pin_obj_t, type);
    self->id = id;
    self->mode = IN;
    self->pull = 0;
    mp_map_t kw;
    mp_map_init_fixed_table(&kw, n_kw, args + n_args);
    pin_init_helper(self, n_args - 1, args + 1, &kw);
    return MP_OBJ_FROM_PTR(self);
}

// value(): an output its level; an open drain released, or an input, its pull (nothing drives it)
static mp_obj_t pin_read(gpio_pin_obj_t *self) {
    if (self->mode == OUT || (self->mode == OPEN_DRAIN && !level_of(self->id))) {
        return MP_OBJ_NEW_SMALL_INT(level_of(self->id));
    }
    return MP_OBJ_NEW_SMALL_INT(self->pull == PULL_UP);
}

static mp_obj_t pin_call(mp_obj_t self_in, size_t n_args, size_t n_kw, const mp_obj_t *args) {
    mp_arg_check_num(n_args, n_kw, 0, 1, false);
    gpio_pin_obj_t *self = MP_OBJ_TO_PTR(self_in);
    if (n_args == 0) {
        return pin_read(self);
    }
    clock_gpio_write(self->id, mp_obj_is_true(args[0]));
    return mp_const_none;
}

static mp_obj_t pin_value(size_t n_args, const mp_obj_t *args) {
    return pin_call(args[0], n_args - 1, 0, args + 1);
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(pin_value_obj, 1, 2, pin_value);

static mp_obj_t pin_on(mp_obj_t self_in) {
    clock_gpio_write(((gpio_pin_obj_t *)MP_OBJ_TO_PTR(self_in))->id, true);
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_1(pin_on_obj, pin_on);

static mp_obj_t pin_off(mp_obj_t self_in) {
    clock_gpio_write(((gpio_pin_obj_t *)MP_OBJ_TO_PTR(self_in))->id, false);
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_1(pin_off_obj, pin_off);

static mp_obj_t pin_init(size_t n_args, const mp_obj_t *args, mp_map_t *kw) {
    return pin_init_helper(MP_OBJ_TO_PTR(args[0]), n_args - 1, args + 1, kw);
}
static MP_DEFINE_CONST_FUN_OBJ_KW(pin_init_obj, 1, pin_init);

// irq(): accepted; nothing on the board changes an input, so it never fires
static mp_obj_t pin_irq(size_t n_args, const mp_obj_t *args, mp_map_t *kw) {
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_KW(pin_irq_obj, 1, pin_irq);

static void pin_print(const mp_print_t *print, mp_obj_t self_in, mp_print_kind_t kind) {
    mp_printf(print, "Pin(%u)", ((gpio_pin_obj_t *)MP_OBJ_TO_PTR(self_in))->id);
}

static const mp_rom_map_elem_t pin_locals_table[] = {
    C6_FUN(pin, init),
    C6_FUN(pin, value),
    C6_FUN(pin, on),
    C6_FUN(pin, off),
    C6_FUN(pin, irq),
    C6_INT(IN),
    C6_INT(OUT),
    C6_INT(OPEN_DRAIN),
    C6_INT(PULL_UP),
    C6_INT(PULL_DOWN),
    C6_INT(IRQ_RISING),
    C6_INT(IRQ_FALLING),
    C6_INT(WAKE_LOW),
    C6_INT(WAKE_HIGH),
    C6_INT(DRIVE_0),
    C6_INT(DRIVE_1),
    C6_INT(DRIVE_2),
    C6_INT(DRIVE_3),
};
static MP_DEFINE_CONST_DICT(pin_locals_dict, pin_locals_table);

static MP_DEFINE_CONST_OBJ_TYPE(
    gpio_pin_type, MP_QSTR_Pin, MP_TYPE_FLAG_NONE,
    make_new, pin_make_new, print, pin_print, call, pin_call, locals_dict, &pin_locals_dict);

static const mp_rom_map_elem_t gpio_module_globals_table[] = {
    { MP_ROM_QSTR(MP_QSTR___name__), MP_ROM_QSTR(MP_QSTR__c6gpio) },
    { MP_ROM_QSTR(MP_QSTR_Pin), MP_ROM_PTR(&gpio_pin_type) },
};
C6_MODULE(MP_REGISTER_MODULE, _c6gpio, gpio_module_globals_table);
