"""The bench side of the agent wire protocol (docs/protocol.md): codec, transports, clock sync, sessions."""

from bench.agent.session import AgentError, AgentSession, FrameRecord
from bench.agent.transport import LineTransport, open_transport

__all__ = ["AgentError", "AgentSession", "FrameRecord", "LineTransport", "open_transport"]
