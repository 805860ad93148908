"""A recorded session on disk (MCAP): write one, read one back with named errors for malformed files."""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcap.exceptions import EndOfFile, RecordLengthLimitExceeded
from mcap.records import Channel, Chunk, Header, Message, Metadata
from mcap.stream_reader import StreamReader
from mcap.writer import CompressionType, Writer

from bench.core.errors import ConfigError
from bench.core.folders import replacing
from bench.core.inputs import InputError, open_input
from bench.replay.channels import BY_TOPIC, CHANNELS, EVENT_SCHEMA, PayloadError

FORMAT_PROFILE = "npc-session"
FORMAT_VERSION = "1"
LIBRARY = "npc-hil-bench session writer 1"  # fixed, so a file's bytes do not depend on the mcap version
CHUNK_LIMIT = 64 * 1024 * 1024
"""The largest MCAP record (a chunk, inflated or not) a session may hold; the writer's chunks are 256 KiB."""
MAX_MESSAGES = 1_000_000
"""The most messages one session may hold: a replay holds them all, read and planned, in memory (about 54 min
of voice, gaze and mocap at their full rates; 10^6 messages peak near 760 MiB, within the 1 GiB bound, by
tests/bench/bench_session_memory.py)."""
MAX_LABEL = 200
"""The longest session id or scenario name (printable characters only)."""
MAX_GAP_S = 60.0
"""The longest silence between two messages of a session; a longer one is refused (a replay would wait it)."""


class SessionError(ConfigError):
    """A session file the bench cannot use."""


class SessionNotFound(SessionError):
    """The session file does not exist or cannot be read."""


class NotASession(SessionError):
    """The file is not MCAP, or is MCAP from something other than the bench's session recorder."""


class SessionTruncated(SessionError):
    """The MCAP file ends early (a recorder that stopped mid-write)."""


class BadSessionMessage(SessionError):
    """A message whose payload does not fit its channel, or that goes back in time."""


@dataclass(frozen=True, slots=True)
class SessionMessage:
    """One recorded message: its original timestamp (ns), channel name and decoded value."""

    ts_ns: int
    channel: str
    value: Any


@dataclass
class Session:
    """A whole session in memory, messages in timestamp order."""

    session_id: str
    scenario: str
    messages: list[SessionMessage]
    meta: dict[str, str] = field(default_factory=dict)
    path: Path | None = None

    @property
    def start_ns(self) -> int:
        """Timestamp of the first message."""
        return self.messages[0].ts_ns if self.messages else 0

    @property
    def duration_s(self) -> float:
        """Seconds from the first to the last message."""
        return (self.messages[-1].ts_ns - self.messages[0].ts_ns) / 1e9 if self.messages else 0.0

    def channels(self) -> list[str]:
        """Channel names present, in the bench's channel order."""
        present = {m.channel for m in self.messages}
        return [c for c in CHANNELS if c in present]


def write_session(path: Path, session: Session) -> None:
    """Write `session` as an MCAP file (zstd chunks, indexed, one metadata record `session`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _write(path, session)  # a full disk or an interrupt leaves no partial .mcap behind, and any old file as it was


def _write(path: Path, session: Session) -> None:
    """Into a new temp file beside `path`, renamed over it (bench.core.folders): never through a link."""
    with replacing(path, "session folder") as fh:
        _write_mcap(fh, session)


def _write_mcap(fh: Any, session: Session) -> None:
    """The session as MCAP into the open file `fh`."""
    writer = Writer(fh, compression=CompressionType.ZSTD, chunk_size=256 * 1024)
    writer.start(profile=FORMAT_PROFILE, library=LIBRARY)
    event_schema = writer.register_schema("npc.event", "jsonschema", json.dumps(EVENT_SCHEMA, sort_keys=True).encode())
    ids: dict[str, int] = {}
    for spec in CHANNELS.values():
        meta = {"channel": spec.name, "description": spec.description}
        if spec.rate_hz is not None:
            meta["rate_hz"] = f"{spec.rate_hz:g}"
        if spec.floats:
            meta["values"] = str(spec.floats)
        schema_id = event_schema if spec.encoding == "json" else 0
        ids[spec.name] = writer.register_channel(spec.topic, spec.encoding, schema_id, meta)
    for seq, msg in enumerate(session.messages):
        data = CHANNELS[msg.channel].encode(msg.value)
        writer.add_message(ids[msg.channel], log_time=msg.ts_ns, data=data, publish_time=msg.ts_ns, sequence=seq)
    writer.add_metadata(
        "session",
        {"id": session.session_id, "scenario": session.scenario, "format_version": FORMAT_VERSION, **session.meta},
    )
    writer.finish()


def read_session(path: str | Path, *, max_gap_s: float = MAX_GAP_S, values: bool = True) -> Session:
    """Read and validate a session file; SessionError subclasses name what is wrong and where. `values` False:
    each message is decoded and checked, then its value dropped (None): what `session info` and the commands that
    only check a file need, in memory that does not grow with the payloads (a message's time and channel only)."""
    path = Path(path)
    try:
        fh = open_input(path, "session file", hint="make one with `hilbench session synth`")
    except InputError as exc:
        raise SessionNotFound(exc.message, hint=exc.hint, file=str(path)) from None
    with fh:
        head = fh.read(8)
        if head != b"\x89MCAP0\r\n":
            raise NotASession(f"{path}: not an MCAP file (bad magic bytes)", hint="sessions are MCAP files")
        fh.seek(0)
        try:
            _check_record_sizes(fh, path)
            fh.seek(0)
            records = StreamReader(fh, validate_crcs=True, record_size_limit=CHUNK_LIMIT).records
            meta, messages = _read_records(records, path, values)
        except SessionError:
            raise
        except (EndOfFile, EOFError):
            raise SessionTruncated(
                f"{path}: the file ends early (at {path.stat().st_size} bytes, inside a record)",
                hint="the recorder probably stopped mid-write; record the session again",
                file=str(path),
            ) from None
        except Exception as exc:  # McapError (CRC), zstd/lz4 errors, struct.error: the bytes are bad
            raise SessionTruncated(
                f"{path}: the file is corrupt: its bytes changed after they were written ({type(exc).__name__}:"
                f" {str(exc)[:120]})",
                hint="copy the session again from where it was recorded, or record it again",
                file=str(path),
            ) from None
    if not messages:
        raise BadSessionMessage(f"{path}: the session holds no messages")
    _check_gaps(messages, path, max_gap_s)
    session_id = _label(meta.pop("id", path.stem), "session id", path)
    scenario = _label(meta.pop("scenario", ""), "scenario", path)
    meta.pop("format_version", None)
    return Session(session_id=session_id, scenario=scenario, messages=messages, meta=meta, path=path)


def _label(text: str, what: str, path: Path) -> str:
    """`text` (a session id or scenario: it is shown, stored and put in reports) when it is at most MAX_LABEL
    printable characters; a BadSessionMessage saying what is wrong otherwise."""
    if len(text) > MAX_LABEL:
        raise BadSessionMessage(f"{path}: the {what} is {len(text)} characters, over the {MAX_LABEL}-character limit",
                                hint="record the session again", file=str(path))  # fmt: skip
    if not text.isprintable():
        raise BadSessionMessage(f"{path}: the {what} {text[:40]!r} holds control characters",
                                hint="record the session again", file=str(path))  # fmt: skip
    return text


def _check_record_sizes(fh: Any, path: Path) -> None:
    """SessionTruncated when a record, or a chunk once inflated, is over CHUNK_LIMIT: read without inflating
    anything (a 200 MB event zstd-packed into 50 KB is refused before it takes 200 MB)."""
    records = StreamReader(fh, emit_chunks=True, record_size_limit=CHUNK_LIMIT).records
    try:
        for record in records:
            if isinstance(record, Chunk) and record.uncompressed_size > CHUNK_LIMIT:
                raise BadSessionMessage(
                    f"{path}: a chunk inflates to {record.uncompressed_size} bytes, over the {CHUNK_LIMIT >> 20} MiB"
                    " limit for a session chunk",
                    hint="an event this large cannot be replayed; record the session again",
                )
    except RecordLengthLimitExceeded as exc:
        claimed = int(re.search(r"length (\d+)", str(exc))[1]) if re.search(r"length (\d+)", str(exc)) else 0
        size = os.fstat(fh.fileno()).st_size
        if claimed > size:  # a damaged length field, not a record that exists
            raise SessionTruncated(
                f"{path}: the file is corrupt: a record's length field says {claimed} bytes, the file has {size}",
                hint="copy the session again from where it was recorded, or record it again",
                file=str(path),
            ) from None
        raise BadSessionMessage(
            f"{path}: a record is over the {CHUNK_LIMIT >> 20} MiB limit for a session record",
            hint="an event this large cannot be replayed; record the session again",
        ) from None


def _check_gaps(messages: list[SessionMessage], path: Path, max_gap_s: float) -> None:
    """BadSessionMessage naming the first silence longer than `max_gap_s` between two messages."""
    limit_ns = int(max_gap_s * 1e9)
    for before, after in itertools.pairwise(messages):
        gap = after.ts_ns - before.ts_ns
        if gap > limit_ns:
            raise BadSessionMessage(
                f"{path}: a gap of {gap / 1e9:.6g} s after {before.channel} at {before.ts_ns} ns, over the"
                f" {max_gap_s:g} s limit",
                hint="a replay would wait that long; cut the session or record it again",
            )


def _read_records(records: Iterable[Any], path: Path, values: bool) -> tuple[dict[str, str], list[SessionMessage]]:
    """The session metadata and the messages in time order, in one pass over the file's records (chunks inflated one
    at a time, their CRCs checked: mcap's seeking reader queues every chunk before it yields a message). Read in
    file order (a recorder writes them in order) and sorted only when the file is not; at most MAX_MESSAGES.
    `values` False: each decoded value is checked and dropped."""
    meta: dict[str, str] | None = None
    channels: dict[int, Channel] = {}
    messages: list[SessionMessage] = []
    in_order, last = True, -1
    for record in records:
        if isinstance(record, Header) and record.profile != FORMAT_PROFILE:
            raise NotASession(
                f"{path}: MCAP profile is {record.profile!r}, not {FORMAT_PROFILE!r}",
                hint="record sessions with the bench's recorder or `hilbench session synth`",
            )
        if isinstance(record, Metadata) and record.name == "session" and meta is None:
            meta = dict(record.metadata)
        elif isinstance(record, Channel):
            channels[record.id] = record
        elif isinstance(record, Message):
            message = _checked(record, channels, len(messages), path, values)
            messages.append(message)
            in_order = in_order and message.ts_ns >= last
            last = message.ts_ns
    if meta is None:
        raise NotASession(f"{path}: no 'session' metadata record", hint="was this written by the bench's recorder?")
    if meta.get("format_version") != FORMAT_VERSION:
        version = meta.get("format_version")
        raise NotASession(f"{path}: session format version {version!r}, this bench reads {FORMAT_VERSION!r}")
    if not in_order:
        messages.sort(key=lambda m: m.ts_ns)  # stable: equal times keep the file's order
    return meta, messages


def _checked(message: Message, channels: dict[int, Channel], index: int, path: Path, values: bool) -> SessionMessage:
    """Message #`index` of the file, decoded and checked against its channel."""
    if index >= MAX_MESSAGES:
        raise BadSessionMessage(
            f"{path}: more than {MAX_MESSAGES} messages, the limit for one session (held in memory to replay)",
            hint="cut the session into parts (`hilbench session info` shows its span)",
            file=str(path),
        )
    channel = channels.get(message.channel_id)
    if channel is None:
        raise SessionTruncated(f"{path}: message #{index} names channel {message.channel_id}, which no record defines",
                               hint="copy the session again from where it was recorded, or record it again",
                               file=str(path))  # fmt: skip
    spec = BY_TOPIC.get(channel.topic)
    if spec is None:
        raise BadSessionMessage(
            f"{path}: message #{index} on unknown topic {channel.topic!r}", hint=f"known topics: {', '.join(BY_TOPIC)}"
        )
    if channel.message_encoding != spec.encoding:
        raise BadSessionMessage(
            f"{path}: topic {channel.topic}: encoding {channel.message_encoding!r}, expected {spec.encoding!r}"
        )
    try:
        value = spec.decode(message.data)
    except PayloadError as exc:
        raise BadSessionMessage(f"{path}: {spec.name} message #{index} at {message.log_time} ns: {exc}") from None
    return SessionMessage(message.log_time, spec.name, value if values else None)


def messages_from(items: Iterable[tuple[int, str, Any]]) -> list[SessionMessage]:
    """SessionMessages from (ts_ns, channel, value) tuples, sorted by time (stable per channel)."""
    return sorted((SessionMessage(ts, ch, v) for ts, ch, v in items), key=lambda m: m.ts_ns)
