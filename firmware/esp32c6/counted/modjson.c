// `json`: dump/dumps through the core's JSON printing, load/loads with a parser written here (in C, as the
// chip's firmware parses: JSON is on the agent's path for manifests and records).
#include <string.h>

#include "py/objstr.h"
#include "py/parsenum.h"
#include "py/runtime.h"
#include "py/stream.h"
#include "module.h"

static void print_json(const mp_print_t *base, mp_obj_t obj, mp_obj_t separators) {
    mp_print_ext_t print;
    print.base = *base;
    print.item_separator = ", ";
    print.key_separator = ": ";
    if (separators != mp_const_none) {
        mp_obj_t *items;
        mp_obj_get_array_fixed_n(separators, 2, &items);
        print.item_separator = mp_obj_str_get_str(items[0]);
        print.key_separator = mp_obj_str_get_str(items[1]);
    }
    mp_obj_print_helper(&print.base, obj, PRINT_JSON);
}

static const mp_arg_t dump_args[] = {
    { MP_QSTR_obj, MP_ARG_REQUIRED | MP_ARG_OBJ, {.u_rom_obj = MP_ROM_NONE} },
    { MP_QSTR_stream, MP_ARG_OBJ, {.u_rom_obj = MP_ROM_NONE} },
    { MP_QSTR_separators, MP_ARG_KW_ONLY | MP_ARG_OBJ, {.u_rom_obj = MP_ROM_NONE} },
};

static const mp_arg_t dumps_args[] = {
    { MP_QSTR_obj, MP_ARG_REQUIRED | MP_ARG_OBJ, {.u_rom_obj = MP_ROM_NONE} },
    { MP_QSTR_separators, MP_ARG_KW_ONLY | MP_ARG_OBJ, {.u_rom_obj = MP_ROM_NONE} },
};

static mp_obj_t json_dumps(size_t n_args, const mp_obj_t *pos, mp_map_t *kw) {
    mp_arg_val_t a[2];
    mp_arg_parse_all(n_args, pos, kw, 2, dumps_args, a);
    vstr_t vstr;
    mp_print_t print;
    vstr_init_print(&vstr, 16, &print);
    print_json(&print, a[0].u_obj, a[1].u_obj);
    return mp_obj_new_str_from_utf8_vstr(&vstr);
}
static MP_DEFINE_CONST_FUN_OBJ_KW(json_dumps_obj, 1, json_dumps);

static mp_obj_t json_dump(size_t n_args, const mp_obj_t *pos, mp_map_t *kw) {
    mp_arg_val_t a[3];
    mp_arg_parse_all(n_args, pos, kw, 3, dump_args, a);
    mp_get_stream_raise(a[1].u_obj, MP_STREAM_OP_WRITE);
    mp_print_t print = {MP_OBJ_TO_PTR(a[1].u_obj), mp_stream_write_adaptor};
    print_json(&print, a[0].u_obj, a[2].u_obj);
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_KW(json_dump_obj, 2, json_dump);

typedef struct {
    const char *p;
    const char *end;
    int depth;
} parser_t;

static MP_NORETURN void syntax_error(void) {
    mp_raise_ValueError(MP_ERROR_TEXT("syntax error in JSON"));
}

static void skip_ws(parser_t *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) {
        ps->p++;
    }
}

static bool take(parser_t *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, word, n) == 0) {
        ps->p += n;
        return true;
    }
    return false;
}

static int hex4(parser_t *ps) {
    if (ps->end - ps->p < 4) {
        syntax_error();
    }
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *ps->p++;
        int d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
        if (d < 0) {
            syntax_error();
        }
        v = v << 4 | d;
    }
    return v;
}

static void add_utf8(vstr_t *v, uint32_t cp) {
    if (cp < 0x80) {
        vstr_add_byte(v, cp);
    } else if (cp < 0x800) {
        vstr_add_byte(v, 0xc0 | cp >> 6);
        vstr_add_byte(v, 0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        vstr_add_byte(v, 0xe0 | cp >> 12);
        vstr_add_byte(v, 0x80 | (cp >> 6 & 0x3f));
        vstr_add_byte(v, 0x80 | (cp & 0x3f));
    } else {
        vstr_add_byte(v, 0xf0 | cp >> 18);
        vstr_add_byte(v, 0x80 | (cp >> 12 & 0x3f));
        vstr_add_byte(v, 0x80 | (cp >> 6 & 0x3f));
        vstr_add_byte(v, 0x80 | (cp & 0x3f));
    }
}

static mp_obj_t parse_string(parser_t *ps) {
    ps->p++; // the opening quote
    const char *start = ps->p;
    while (ps->p < ps->end && *ps->p != '"' && *ps->p != '\\') {
        ps->p++;
    }
    if (ps->p < ps->end && *ps->p == '"') { // no escapes: one copy
        mp_obj_t s = mp_obj_new_str(start, ps->p - start);
        ps->p++;
        return s;
    }
    vstr_t v;
    vstr_init(&v, ps->p - start + 16);
    vstr_add_strn(&v, start, ps->p - start);
    while (ps->p < ps->end && *ps->p != '"') {
        char c = *ps->p++;
        if (c != '\\') {
            vstr_add_byte(&v, c);
            continue;
        }
        if (ps->p >= ps->end) {
            syntax_error();
        }
        c = *ps->p++;
        switch (c) {
            case 'b': vstr_add_byte(&v, '\b'); break;
            case 'f': vstr_add_byte(&v, '\f'); break;
            case 'n': vstr_add_byte(&v, '\n'); break;
            case 'r': vstr_add_byte(&v, '\r'); break;
            case 't': vstr_add_byte(&v, '\t'); break;
            case 'u': {
                uint32_t cp = hex4(ps);
                if (cp >= 0xd800 && cp < 0xdc00 && take(ps, "\\u")) {
                    uint32_t lo = hex4(ps);
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                }
                add_utf8(&v, cp);
                break;
            }
            default: vstr_add_byte(&v, c); break; // \" \\ \/
        }
    }
    if (ps->p >= ps->end) {
        syntax_error();
    }
    ps->p++;
    return mp_obj_new_str_from_utf8_vstr(&v);
}

static mp_obj_t parse_number(parser_t *ps) {
    const char *start = ps->p;
    bool is_float = false;
    if (*ps->p == '-') {
        ps->p++;
    }
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == '.' || c == 'e' || c == 'E' || ((c == '+' || c == '-') && (ps->p[-1] | 0x20) == 'e')) {
            is_float = true;
        } else if (c < '0' || c > '9') {
            break;
        }
        ps->p++;
    }
    if (ps->p == start || (ps->p == start + 1 && *start == '-')) {
        syntax_error();
    }
    if (is_float) {
        return mp_parse_num_float(start, ps->p - start, false, NULL);
    }
    return mp_parse_num_integer(start, ps->p - start, 10, NULL);
}

static mp_obj_t parse_value(parser_t *ps) {
    skip_ws(ps);
    if (ps->p >= ps->end) {
        syntax_error();
    }
    char c = *ps->p;
    if (c == '"') {
        return parse_string(ps);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        return parse_number(ps);
    }
    if (take(ps, "true")) {
        return mp_const_true;
    }
    if (take(ps, "false")) {
        return mp_const_false;
    }
    if (take(ps, "null")) {
        return mp_const_none;
    }
    if (c != '[' && c != '{') {
        syntax_error();
    }
    if (++ps->depth > 64) {
        mp_raise_ValueError(MP_ERROR_TEXT("JSON nested too deeply"));
    }
    ps->p++;
    bool is_list = c == '[';
    mp_obj_t out = is_list ? mp_obj_new_list(0, NULL) : mp_obj_new_dict(0);
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == (is_list ? ']' : '}')) {
        ps->p++;
        ps->depth--;
        return out;
    }
    for (;;) {
        if (is_list) {
            mp_obj_list_append(out, parse_value(ps));
        } else {
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != '"') {
                syntax_error();
            }
            mp_obj_t key = parse_string(ps);
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p++ != ':') {
                syntax_error();
            }
            mp_obj_dict_store(out, key, parse_value(ps));
        }
        skip_ws(ps);
        if (ps->p >= ps->end) {
            syntax_error();
        }
        char d = *ps->p++;
        if (d == ',') {
            continue;
        }
        if (d == (is_list ? ']' : '}')) {
            break;
        }
        syntax_error();
    }
    ps->depth--;
    return out;
}

static mp_obj_t json_loads(mp_obj_t text) {
    mp_buffer_info_t buf;
    mp_get_buffer_raise(text, &buf, MP_BUFFER_READ);
    parser_t ps = {buf.buf, (const char *)buf.buf + buf.len, 0};
    mp_obj_t value = parse_value(&ps);
    skip_ws(&ps);
    if (ps.p != ps.end) {
        syntax_error();
    }
    return value;
}
static MP_DEFINE_CONST_FUN_OBJ_1(json_loads_obj, json_loads);

static mp_obj_t json_load(mp_obj_t stream) {
    mp_obj_t read = mp_load_attr(stream, MP_QSTR_read);
    return json_loads(mp_call_function_0(read));
}
static MP_DEFINE_CONST_FUN_OBJ_1(json_load_obj, json_load);

static const mp_rom_map_elem_t json_module_globals_table[] = {
    { MP_ROM_QSTR(MP_QSTR___name__), MP_ROM_QSTR(MP_QSTR_json) },
    C6_FUN(json, dump),
    C6_FUN(json, dumps),
    C6_FUN(json, load),
    C6_FUN(json, loads),
};
C6_MODULE(MP_REGISTER_EXTENSIBLE_MODULE, json, json_module_globals_table);
