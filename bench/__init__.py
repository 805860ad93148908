"""npc-hil-bench: hardware-in-the-loop test bench for on-device NPC inference."""

__version__ = "0.1.0"
