"""Update channels: how a device fetches a model from the bench's store. A device's `update_channel` setting
names one: `coap` (block-wise over UDP, bench/ota/server.py; the default), `grpc` (a server-streaming call,
bench/ota/grpc_server.py; Linux-class boards whose agent has grpcio) or `websocket` (bench/ota/ws_server.py;
web devices). Every channel serves the same store, signatures and paths, so rollout and the fault suite do
not care which one carries the bytes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from bench.config.fleet import Device
from bench.config.kinds import UPDATE_CHANNELS
from bench.core.errors import ConfigError
from bench.ota.store import ModelStore
from bench.virtual import uplinks

SCHEMES = dict(zip(UPDATE_CHANNELS, ("coap", "grpc", "ws"), strict=True))
CAPS = {"coap": "update-coap", "grpc": "update-grpc", "websocket": "update-ws"}  # the agent cap each one needs


def channel_of(device: Device) -> str:
    """The device's update channel, or ConfigError naming the device and the setting."""
    channel = device.settings.update_channel
    if channel not in SCHEMES:
        raise ConfigError(
            f"device {device.name!r}: update_channel {channel!r} is not a channel",
            hint=f"use one of {', '.join(SCHEMES)}",
        )
    return channel


@contextlib.asynccontextmanager
async def serve(store: ModelStore, channels: set[str], host: str) -> AsyncIterator[dict[str, int]]:
    """Serve `store` on each channel in `channels` (bound to `host`); yields channel -> port. When they stop, no
    virtual board reaches their ports any more (bench.virtual.uplinks)."""
    ports: dict[str, int] = {}
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(lambda: uplinks.revoke(ports.values()))
        if "coap" in channels:
            from bench.ota.server import UpdateServer

            ports["coap"] = (await stack.enter_async_context(UpdateServer(store, host=host))).port
        if "websocket" in channels:
            from bench.ota.ws_server import WsUpdateServer

            ports["websocket"] = (await stack.enter_async_context(WsUpdateServer(store, host=host))).port
        if "grpc" in channels:
            from bench.ota.grpc_server import GrpcUpdateServer

            ports["grpc"] = (await stack.enter_async_context(GrpcUpdateServer(store, host=host))).port
        yield ports


def base_url(channel: str, port: int, host: str) -> str:
    """`SCHEME://HOST:PORT` of `channel`'s server as the device reaches it."""
    return f"{SCHEMES[channel]}://{f'[{host}]' if ':' in host else host}:{port}"
