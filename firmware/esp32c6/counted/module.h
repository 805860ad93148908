// The end of each of the port's built-in modules: its globals dict from `table`, the module object
// mp_module_NAME, and its registration under the name NAME by `register` (MP_REGISTER_MODULE, or
// MP_REGISTER_EXTENSIBLE_MODULE for a module a file NAME.py may extend). The registration stays a call of
// `register` in the preprocessed source, where MicroPython's makemoduledefs.py finds it.
#ifndef C6_MODULE_H
#define C6_MODULE_H
#include "py/obj.h"

#define C6_MODULE(register, name, table) \
    static MP_DEFINE_CONST_DICT(mp_module_##name##_globals, table); \
    const mp_obj_module_t mp_module_##name = { \
        .base = { &mp_type_module }, \
        .globals = (mp_obj_dict_t *)&mp_module_##name##_globals, \
    }; \
    register(MP_QSTR_##name, mp_module_##name)
#endif
