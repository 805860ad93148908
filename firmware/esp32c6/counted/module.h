// What the port's built-in modules and types write alike: the entries of their globals and locals tables, and
// the end of each module.
#ifndef C6_MODULE_H
#define C6_MODULE_H
#include "py/obj.h"

// A table entry naming the function object PREFIX_NAME_obj `name` (a method, or a module's function).
#define C6_FUN(prefix, name) { MP_ROM_QSTR(MP_QSTR_##name), MP_ROM_PTR(&prefix##_##name##_obj) }
// A table entry naming the integer constant `name` by its own name.
#define C6_INT(name) { MP_ROM_QSTR(MP_QSTR_##name), MP_ROM_INT(name) }

// The end of a module: its globals dict from `table`, the module object mp_module_NAME, and its registration
// under the name NAME by `register` (MP_REGISTER_MODULE, or MP_REGISTER_EXTENSIBLE_MODULE for a module a file
// NAME.py may extend). The registration stays a call of `register` in the preprocessed source, where
// MicroPython's makemoduledefs.py finds it.
#define C6_MODULE(register, name, table) \
    static MP_DEFINE_CONST_DICT(mp_module_##name##_globals, table); \
    const mp_obj_module_t mp_module_##name = { \
        .base = { &mp_type_module }, \
        .globals = (mp_obj_dict_t *)&mp_module_##name##_globals, \
    }; \
    register(MP_QSTR_##name, mp_module_##name)
#endif
