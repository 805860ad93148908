// `socket`: UDP over the board's Wi-Fi (net.c), what the agent's CoAP update client uses, with the esp32 port's
// constants and errors. Addresses are numeric IPv4 only: the board has no DNS, so a name fails as a lookup on
// the chip fails (OSError -202). Waiting for a datagram idles the core on the counted clock, and Ctrl-C or a
// scheduled callback ends the wait as in the REPL's wait for a key (mphalport.c). The pipe does not carry the
// local port, so bind() only records it, and what arrives goes to whichever socket asks first. A TCP socket
// can be made (socket.socket()'s default), but the pipe carries no TCP: it never connects (ENOTCONN).
#include <errno.h>
#include <string.h>

#include "py/mperrno.h"
#include "py/mphal.h"
#include "py/runtime.h"
#include "py/stream.h"
#include "module.h"
#include "net.h"
#include "virt.h"

#define AF_INET      (2)
#define SOCK_STREAM  (1)
#define SOCK_DGRAM   (2)
#define SOCK_RAW     (3)
#define IPPROTO_UDP  (17)
#define SOL_SOCKET   (0xfff)
#define SO_REUSEADDR (0x0004)
#define EAI_FAIL     (202) // lwIP's lookup failure, raised negated by the esp32 port

typedef struct {
    mp_obj_base_t base;
    bool open;
    bool stream;          // SOCK_STREAM: never connected
    uint16_t port;        // bind()'s port (recorded only)
    int64_t timeout_ns;   // -1: block; 0: non-blocking
} socket_obj_t;

static const mp_obj_type_t socket_type;

// "a.b.c.d" into four bytes; false when it is not a numeric IPv4 address.
static bool parse_ip(const char *s, size_t len, uint8_t ip[4]) {
    uint32_t part = 0, parts = 0, digits = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] >= '0' && s[i] <= '9') {
            part = part * 10 + (s[i] - '0');
            if (++digits > 3 || part > 255) {
                return false;
            }
        } else if ((i == len || s[i] == '.') && digits && parts < 4) {
            ip[parts++] = part;
            part = digits = 0;
        } else {
            return false;
        }
    }
    return parts == 4;
}

static mp_obj_t ip_str(const uint8_t ip[4]) {
    vstr_t v;
    vstr_init(&v, 16);
    vstr_printf(&v, "%u.%u.%u.%u", ip[0], ip[1], ip[2], ip[3]);
    return mp_obj_new_str_from_vstr(&v);
}

static void parse_addr(mp_obj_t addr, uint8_t ip[4], uint16_t *port) {
    mp_obj_t *items;
    mp_obj_get_array_fixed_n(addr, 2, &items);
    size_t len;
    const char *host = mp_obj_str_get_data(items[0], &len);
    if (!parse_ip(host, len, ip)) {
        mp_raise_OSError(-EAI_FAIL);
    }
    *port = mp_obj_get_int(items[1]);
}

static socket_obj_t *open_socket(mp_obj_t self_in) {
    socket_obj_t *self = MP_OBJ_TO_PTR(self_in);
    if (!self->open) {
        mp_raise_OSError(MP_EBADF);
    }
    return self;
}

static bool recv_wake(void) {
    return net_rx_any() || MP_STATE_THREAD(mp_pending_exception) != MP_OBJ_NULL
           || MP_STATE_VM(sched_state) == MP_SCHED_PENDING;
}

// Wait for a datagram as the socket's timeout says: ETIMEDOUT when it passes, EAGAIN when non-blocking.
static void wait_datagram(socket_obj_t *self) {
    uint64_t start = clock_chip_ns();
    for (;;) {
        if (net_rx_any()) {
            return;
        }
        if (self->timeout_ns == 0) {
            mp_raise_OSError(MP_EAGAIN);
        }
        uint64_t left = UINT64_MAX;
        if (self->timeout_ns > 0) {
            uint64_t now = clock_chip_ns();
            if (now - start >= (uint64_t)self->timeout_ns) {
                mp_raise_OSError(MP_ETIMEDOUT);
            }
            left = (uint64_t)self->timeout_ns - (now - start);
        }
        clock_idle(left, recv_wake);
        mp_handle_pending(true);
    }
}

static mp_obj_t receive(mp_obj_t self_in, mp_obj_t n_in, bool with_addr) {
    socket_obj_t *self = open_socket(self_in);
    if (self->stream) {
        mp_raise_OSError(MP_ENOTCONN);
    }
    mp_int_t n = mp_obj_get_int(n_in);
    if (n < 0) {
        mp_raise_ValueError(NULL);
    }
    wait_datagram(self);
    vstr_t v;
    vstr_init_len(&v, n < NET_MTU ? n : NET_MTU);
    uint8_t ip[4];
    uint16_t port;
    int len = net_recv(ip, &port, (uint8_t *)v.buf, v.len);
    v.len = len < (int)v.len ? (size_t)len : v.len;
    mp_obj_t data = mp_obj_new_bytes_from_vstr(&v);
    if (!with_addr) {
        return data;
    }
    mp_obj_t addr[2] = {ip_str(ip), MP_OBJ_NEW_SMALL_INT(port)};
    mp_obj_t t[2] = {data, mp_obj_new_tuple(2, addr)};
    return mp_obj_new_tuple(2, t);
}

static mp_obj_t socket_recv(mp_obj_t self_in, mp_obj_t n_in) {
    return receive(self_in, n_in, false);
}
static MP_DEFINE_CONST_FUN_OBJ_2(socket_recv_obj, socket_recv);

static mp_obj_t socket_recvfrom(mp_obj_t self_in, mp_obj_t n_in) {
    return receive(self_in, n_in, true);
}
static MP_DEFINE_CONST_FUN_OBJ_2(socket_recvfrom_obj, socket_recvfrom);

static mp_obj_t socket_sendto(mp_obj_t self_in, mp_obj_t buf_in, mp_obj_t addr_in) {
    if (open_socket(self_in)->stream) {
        mp_raise_OSError(MP_ENOTCONN);
    }
    mp_buffer_info_t buf;
    mp_get_buffer_raise(buf_in, &buf, MP_BUFFER_READ);
    uint8_t ip[4];
    uint16_t port;
    parse_addr(addr_in, ip, &port);
    if (buf.len > NET_MTU) {
        mp_raise_OSError(EMSGSIZE); // no fragmentation on this link
    }
    if (!net_send(ip, port, buf.buf, buf.len)) {
        mp_raise_OSError(MP_EHOSTUNREACH); // no Wi-Fi
    }
    return MP_OBJ_NEW_SMALL_INT(buf.len);
}
static MP_DEFINE_CONST_FUN_OBJ_3(socket_sendto_obj, socket_sendto);

static mp_obj_t socket_bind(mp_obj_t self_in, mp_obj_t addr_in) {
    socket_obj_t *self = open_socket(self_in);
    mp_obj_t *items;
    mp_obj_get_array_fixed_n(addr_in, 2, &items);
    self->port = mp_obj_get_int(items[1]);
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_2(socket_bind_obj, socket_bind);

static mp_obj_t socket_settimeout(mp_obj_t self_in, mp_obj_t timeout_in) {
    socket_obj_t *self = open_socket(self_in);
    if (timeout_in == mp_const_none) {
        self->timeout_ns = -1;
    } else {
        mp_float_t s = mp_obj_get_float(timeout_in);
        self->timeout_ns = s <= 0 ? 0 : (int64_t)(s * 1000000) * 1000; // to the microsecond
    }
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_2(socket_settimeout_obj, socket_settimeout);

static mp_obj_t socket_setblocking(mp_obj_t self_in, mp_obj_t flag_in) {
    open_socket(self_in)->timeout_ns = mp_obj_is_true(flag_in) ? -1 : 0;
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_2(socket_setblocking_obj, socket_setblocking);

static mp_obj_t socket_setsockopt(size_t n_args, const mp_obj_t *args) {
    open_socket(args[0]); // SO_REUSEADDR and the like: nothing to set on this link
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(socket_setsockopt_obj, 4, 4, socket_setsockopt);

static mp_obj_t socket_close(mp_obj_t self_in) {
    socket_obj_t *self = MP_OBJ_TO_PTR(self_in);
    if (self->open) {
        self->open = false;
        net_rx_flush(); // answers to this socket must not reach the next one
    }
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_1(socket_close_obj, socket_close);

static mp_obj_t socket_exit(size_t n_args, const mp_obj_t *args) {
    return socket_close(args[0]);
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(socket_exit_obj, 4, 4, socket_exit);

static mp_uint_t socket_ioctl(mp_obj_t self_in, mp_uint_t request, uintptr_t arg, int *errcode) {
    socket_obj_t *self = MP_OBJ_TO_PTR(self_in);
    if (request == MP_STREAM_CLOSE) {
        socket_close(self_in);
        return 0;
    }
    if (request == MP_STREAM_POLL) {
        if (!self->open) {
            return MP_STREAM_POLL_NVAL;
        }
        uintptr_t ret = 0;
        if ((arg & MP_STREAM_POLL_RD) && net_rx_any()) {
            ret |= MP_STREAM_POLL_RD;
        }
        if (arg & MP_STREAM_POLL_WR) {
            ret |= MP_STREAM_POLL_WR; // a send waits only for the host to take the frame
        }
        return ret;
    }
    *errcode = MP_EINVAL;
    return MP_STREAM_ERROR;
}

static const mp_stream_p_t socket_stream_p = {
    .ioctl = socket_ioctl,
};

static const mp_rom_map_elem_t socket_locals_table[] = {
    { MP_ROM_QSTR(MP_QSTR___del__), MP_ROM_PTR(&socket_close_obj) },
    { MP_ROM_QSTR(MP_QSTR___enter__), MP_ROM_PTR(&mp_identity_obj) },
    { MP_ROM_QSTR(MP_QSTR___exit__), MP_ROM_PTR(&socket_exit_obj) },
    C6_FUN(socket, close),
    C6_FUN(socket, bind),
    C6_FUN(socket, sendto),
    C6_FUN(socket, recv),
    C6_FUN(socket, recvfrom),
    C6_FUN(socket, settimeout),
    C6_FUN(socket, setblocking),
    C6_FUN(socket, setsockopt),
};
static MP_DEFINE_CONST_DICT(socket_locals_dict, socket_locals_table);

static void socket_print(const mp_print_t *print, mp_obj_t self_in, mp_print_kind_t kind) {
    socket_obj_t *self = MP_OBJ_TO_PTR(self_in);
    mp_printf(print, "<socket state=%d timeout=%d incoming=0 off=0>", self->open ? 0 : -1,
        self->timeout_ns < 0 ? -1 : (int)(self->timeout_ns / 1000000));
}

static mp_obj_t socket_make_new(const mp_obj_type_t *type, size_t n_args, size_t n_kw, const mp_obj_t *args) {
    mp_arg_check_num(n_args, n_kw, 0, 3, false);
    mp_int_t family = n_args > 0 ? mp_obj_get_int(args[0]) : AF_INET;
    mp_int_t kind = n_args > 1 ? mp_obj_get_int(args[1]) : SOCK_STREAM; // the esp32 port's default
    if (family != AF_INET || (kind != SOCK_DGRAM && kind != SOCK_STREAM)) {
        mp_raise_OSError(MP_EOPNOTSUPP);
    }
    socket_obj_t *self = mp_obj_malloc_with_finaliser(socket_obj_t, &socket_type);
    self->open = true;
    self->stream = kind == SOCK_STREAM;
    self->port = 0;
    self->timeout_ns = -1;
    net_rx_flush(); // what arrived before the socket existed was for no one
    return MP_OBJ_FROM_PTR(self);
}

static MP_DEFINE_CONST_OBJ_TYPE(
    socket_type, MP_QSTR_socket, MP_TYPE_FLAG_NONE,
    make_new, socket_make_new,
    print, socket_print,
    protocol, &socket_stream_p,
    locals_dict, &socket_locals_dict);

// getaddrinfo(host, port, af=0, type=0, proto=0, flags=0): one UDP entry for a numeric address, as the esp32
// port answers for one; a name raises OSError(-202), what the chip raises when its lookup fails.
static mp_obj_t socket_getaddrinfo(size_t n_args, const mp_obj_t *args) {
    size_t len;
    const char *host = mp_obj_str_get_data(args[0], &len);
    uint8_t ip[4];
    if (!parse_ip(host, len, ip)) {
        mp_raise_OSError(-EAI_FAIL);
    }
    mp_obj_t addr[2] = {ip_str(ip), MP_OBJ_NEW_SMALL_INT(mp_obj_get_int(args[1]))};
    mp_obj_t entry[5] = {
        MP_OBJ_NEW_SMALL_INT(AF_INET), MP_OBJ_NEW_SMALL_INT(SOCK_DGRAM), MP_OBJ_NEW_SMALL_INT(IPPROTO_UDP),
        MP_OBJ_NEW_QSTR(MP_QSTR_), mp_obj_new_tuple(2, addr),
    };
    mp_obj_t tuple = mp_obj_new_tuple(5, entry);
    return mp_obj_new_list(1, &tuple);
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(socket_getaddrinfo_obj, 2, 6, socket_getaddrinfo);

static const mp_rom_map_elem_t socket_module_globals_table[] = {
    { MP_ROM_QSTR(MP_QSTR___name__), MP_ROM_QSTR(MP_QSTR_socket) },
    { MP_ROM_QSTR(MP_QSTR_socket), MP_ROM_PTR(&socket_type) },
    C6_FUN(socket, getaddrinfo),
    C6_INT(AF_INET),
    C6_INT(SOCK_STREAM),
    C6_INT(SOCK_DGRAM),
    C6_INT(SOCK_RAW),
    C6_INT(IPPROTO_UDP),
    C6_INT(SOL_SOCKET),
    C6_INT(SO_REUSEADDR),
};
C6_MODULE(MP_REGISTER_MODULE, socket, socket_module_globals_table);
