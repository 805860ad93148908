"""The bench side of the agent wire protocol (docs/protocol.md): codec, transports, clock sync, sessions."""
