"""The bench side of the agent wire protocol (docs/protocol.md): codec, transports, clock sync, sessions."""

from bench.agent.clock import ClockSync
from bench.agent.frame import Frame
from bench.agent.session import AgentError, AgentSession, ProtocolMismatch
from bench.agent.transport import LineTransport, ProcessTransport, SerialTransport, StreamTransport, open_transport

__all__ = [
    "AgentError",
    "AgentSession",
    "ClockSync",
    "Frame",
    "LineTransport",
    "ProcessTransport",
    "ProtocolMismatch",
    "SerialTransport",
    "StreamTransport",
    "open_transport",
]
