# The counted ESP32-C6's frozen modules (MicroPython's manifest format), as the esp32 port freezes them:
# upstream asyncio, the vfs mount at boot (_boot), and the port's machine layer.
include("$(MPY_DIR)/extmod/asyncio")
freeze("$(PORT_DIR)/modules")
