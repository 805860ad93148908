"""What a careless or hostile sender does to an agent: every case is answered with an error, never a crash,
a model fault or a byte of a file outside the models folder (docs/robustness.md)."""

from __future__ import annotations

import hashlib
import time
import zlib

import pytest

from bench.agent.session import AgentError, AgentSession

pytestmark = pytest.mark.e2e


def crc_line(body: bytes) -> bytes:
    return b"~" + body + b"*" + b"%08x" % zlib.crc32(body) + b"\n"


X48 = ",".join(["0.1"] * 47)
BAD_LINES = {
    "1MB line": (b"~" + b"x" * 1_000_000 + b"*00000000\n", "bad_frame"),
    "infer 1e308": (crc_line(b'{"t":"infer","id":50,"x":[1e308,' + X48.encode() + b"]}"), "bad_field"),
    "infer 1e999 (inf)": (crc_line(b'{"t":"infer","id":51,"x":[1e999,' + X48.encode() + b"]}"), "bad_field"),
    "infer -1e999": (crc_line(b'{"t":"infer","id":52,"x":[-1e999,' + X48.encode() + b"]}"), "bad_field"),
    "infer string": (crc_line(b'{"t":"infer","id":53,"x":["a",' + X48.encode() + b"]}"), "bad_field"),
    "infer true": (crc_line(b'{"t":"infer","id":62,"x":[true,' + X48.encode() + b"]}"), "bad_field"),
    "gaze 1e308": (crc_line(b'{"t":"in","seq":1,"ch":"gaze","ts":1,"d":[1e308,0,1]}'), "bad_field"),
    "mocap inf": (crc_line(b'{"t":"in","seq":1,"ch":"mocap","ts":1,"d":[1e999' + b",0" * 50 + b"]}"), "bad_field"),
    "ts inf": (crc_line(b'{"t":"in","seq":1,"ch":"gaze","ts":1e999,"d":[0,0,1]}'), "bad_field"),
    "voicef str": (crc_line(b'{"t":"in","seq":1,"ch":"voicef","ts":1,"d":[0,0,"x",1]}'), "bad_field"),
    "event ctx": (crc_line(b'{"t":"in","seq":1,"ch":"event","ts":1,"d":{"context":{"hp_ratio":1e99}}}'), "bad_field"),
    "start fps 1e9": (crc_line(b'{"t":"start","id":54,"fps":1e9,"vsync_hz":60}'), "bad_field"),
    "start fps 0": (crc_line(b'{"t":"start","id":55,"fps":0,"vsync_hz":60}'), "bad_field"),
    "start fps -5": (crc_line(b'{"t":"start","id":56,"fps":-5,"vsync_hz":60}'), "bad_field"),
    "start fps inf": (crc_line(b'{"t":"start","id":57,"fps":1e999,"vsync_hz":60}'), "bad_field"),
    "start fps 59.5": (crc_line(b'{"t":"start","id":58,"fps":59.5,"vsync_hz":60}'), "bad_field"),
    "start vsync 1e6": (crc_line(b'{"t":"start","id":59,"fps":60,"vsync_hz":1000000}'), "bad_field"),
    "start frames -1": (crc_line(b'{"t":"start","id":60,"fps":60,"vsync_hz":60,"frames":-1}'), "bad_field"),
    "start key_every 0": (crc_line(b'{"t":"start","id":61,"fps":60,"vsync_hz":60,"key_every":0}'), "bad_field"),
}


def test_bad_values_are_bad_field_and_nothing_else_happens(agent) -> None:
    """Every bad line in turn, in one session (an agent start per case cost a Chromium each): each is answered
    with its error code, counted once, and nothing else happens; the agent answers the next one."""

    async def body(s: AgentSession):
        answered = []
        for case, (line, code) in BAD_LINES.items():
            before, seen = await s.stats(), sum(f"code': '{code}'" in c for c in s.console)
            await s.send_raw(line)
            deadline = time.monotonic() + 10
            while sum(f"code': '{code}'" in c for c in s.console) == seen:
                assert time.monotonic() < deadline, (case, s.console[-5:])
                await s.ping()  # the agent keeps answering meanwhile
            answered.append((case, code, before, await s.stats()))
        assert (await s.stop())["t"] == "ack"  # no frame loop was started; stop works
        return answered

    answered = agent.run(body, timeout=180)
    assert [case for case, *_ in answered] == list(BAD_LINES)
    for case, code, before, after in answered:
        assert after["errors"].get(code, 0) == before["errors"].get(code, 0) + 1, case
        assert after["frames"] == before["frames"] and after.get("faults", 0) == before.get("faults", 0), case


def test_a_huge_value_right_after_a_switch_is_no_model_crash(agent) -> None:
    """On probation after a load, an out-of-range input must not count as the new model's fault."""
    path, manifest = agent.deploy("npc-policy-int8-v2", 2)

    async def body(s: AgentSession):
        await s.load(path, manifest)
        with pytest.raises(AgentError) as err:
            await s.infer([1e308] + [0.1] * 47)
        assert err.value.code == "bad_field" and "x" in err.value.detail
        await s.send_raw(crc_line(b'{"t":"in","seq":9,"ch":"gaze","ts":5,"d":[1e999,0,1]}'))
        ok = await s.infer([0.1] * 48)
        return ok, s.faults

    ok, faults = agent.run(body)
    assert ok["model"] == 2 and faults == []


@pytest.mark.parametrize("path", ["../secret.bin", "models/../../secret.bin", "ABS", "/etc/hostname", ""])
def test_load_never_reads_outside_the_models_folder(agent, path: str) -> None:
    secret = agent.folder.parent / "secret.bin"
    secret.write_bytes(b"not a model, and not the agent's business")
    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    _, manifest = agent.deploy("npc-policy-int8-v2", 2)
    path = str(secret) if path == "ABS" else path

    async def body(s: AgentSession):
        with pytest.raises(AgentError) as err:
            await s.load(path, {**manifest, "sha256": "0" * 64})
        return err.value, await s.hello()

    err, hello = agent.run(body)
    assert err.code == "refused" and "models folder" in err.detail, err.detail
    assert digest not in str(err.reply)  # nothing about the file is revealed
    assert hello["model"]["version"] == 1  # the running model is kept


def test_load_refuses_the_agents_own_record(agent) -> None:
    """`load models/current.json` (or a manifest) is no model: refused, and nothing of the file (its hash) is told."""
    _, manifest = agent.deploy("npc-policy-int8-v2", 2)
    record = agent.folder / "models" / "current.json"
    if not record.exists():
        record.write_text('{"path": "models/x", "manifest": {}}\n')
    digest = hashlib.sha256(record.read_bytes()).hexdigest()

    async def body(s: AgentSession):
        with pytest.raises(AgentError) as err:
            await s.load("models/current.json", {**manifest, "sha256": "0" * 64})
        return err.value, await s.hello()

    err, hello = agent.run(body)
    assert err.code == "refused" and "models folder" in err.detail, err.detail
    assert digest not in str(err.reply) and hello["model"]["version"] == 1


UPDATE = b'{"t":"update","id":%d,"url":"coap://127.0.0.1:9/models/npc-policy/1","manifest":{"name":"npc-policy",' \
         b'"version":2,"sha256":"%s"},"coap":{%s}}'  # fmt: skip
BAD_TIMING = ['"ack_timeout_ms":1e308', '"ack_timeout_ms":true', '"ack_timeout_ms":"50"', '"ack_timeout_ms":0',
              '"max_retransmit":1e9', '"max_retransmit":2.5', '"ack_random_factor":0.5']  # fmt: skip


def test_update_timing_out_of_range_is_bad_field(agent) -> None:
    """CoAP timing values from the sender (issue 31 case 12): 1e308 was `internal`; each is `bad_field` at once,
    before anything is fetched, and the agent keeps answering."""
    if type(agent).__name__ == "WebAgent":
        pytest.skip("the web agent updates over WebSocket: no CoAP timing")

    async def body(s: AgentSession):
        codes = []
        for i, field in enumerate(BAD_TIMING):
            seen = sum("code': 'bad_field'" in c for c in s.console)
            await s.send_raw(crc_line(UPDATE % (80 + i, b"0" * 64, field.encode())))
            deadline = time.monotonic() + 10
            while sum("code': 'bad_field'" in c for c in s.console) == seen:
                assert time.monotonic() < deadline, (field, s.console[-5:])
                await s.ping()
            codes.append(field)
        return codes, await s.hello()

    codes, hello = agent.run(body, timeout=120)
    assert codes == BAD_TIMING and hello["model"]["version"] == 1


@pytest.mark.parametrize(
    "path", ["..%2fsecret.bin", "%2e%2e/secret.bin", "..\\secret.bin", "x/%2e%2e%2f..%2fsecret.bin"]
)
def test_the_web_agent_reads_no_storage_file_outside_models(tmp_path, path: str) -> None:
    """The page fetches models from its storage server, which decodes %-escapes: a file in the storage
    folder but outside models/ (which that server would serve) is refused before it is asked for."""
    from tests.conformance.harness import WebAgent

    agent = WebAgent(tmp_path / "agent")
    (agent.folder / "secret.bin").write_bytes(b"not a model either")
    _, manifest = agent.deploy("npc-policy-int8-v2", 2)

    async def body(s: AgentSession):
        with pytest.raises(AgentError) as err:
            await s.load(path, {**manifest, "sha256": "0" * 64})
        return err.value

    err = agent.run(body)
    assert err.code == "refused" and "models folder" in err.detail, err.detail


def test_a_fifo_in_the_models_folder_is_refused_not_waited_on(agent) -> None:
    """`load` of a FIFO (nobody writes to it) is refused at once as no regular file, and the agent answers on;
    before, the host and MicroPython agents blocked in open() for good."""
    import os

    _, manifest = agent.deploy("npc-policy-int8-v2", 2)
    os.mkfifo(agent.models_dir / "fifo.bin")

    async def body(s: AgentSession):
        t0 = time.monotonic()
        with pytest.raises(AgentError) as err:
            await s.load("fifo.bin", manifest, timeout=20)
        return err.value, time.monotonic() - t0, s.faults, await s.hello()

    err, took, faults, hello = agent.run(body)
    assert err.code == "refused" and faults[-1]["kind"] == "parse", (err.reply, faults)
    assert took < 10 and hello["model"]["version"] == 1
