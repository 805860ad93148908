// The board's Wi-Fi as the firmware sees it: a packet pipe to the board (a virtio console), carrying UDP
// datagrams as frames `u16 payload length (big-endian) | IPv4 address | u16 port (big-endian) | payload`: the
// destination on the way out, the source on the way in. The board is the gateway (bench/virtual/esp32c6/wifi.py).
#ifndef C6_NET_H
#define C6_NET_H
#include <stdbool.h>
#include <stdint.h>

#define NET_MTU (1500) // the most payload a frame carries (a larger datagram is refused or dropped)

bool net_init(void);  // false: the board gave no Wi-Fi
bool net_up(void);
// Send one datagram (len <= NET_MTU); false when there is no Wi-Fi.
bool net_send(const uint8_t ip[4], uint16_t port, const void *buf, uint32_t len);
bool net_rx_any(void);
// Take the oldest datagram received: its length (copied up to `cap` bytes, the rest dropped, as a UDP socket
// does), source address and port; -1 when none waits.
int net_recv(uint8_t ip[4], uint16_t *port, uint8_t *buf, uint32_t cap);
void net_rx_flush(void); // drop what was received and not taken
void net_irq(void);      // the device's interrupt (PLIC source net_irq_source)
extern uint32_t net_irq_source; // 0: none
#endif
