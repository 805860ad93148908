"""Model updates over CoAP through the bench's update server: a good one completes and is verified, a forged
signature is refused with the running model kept, a model that crashes is rolled back within 3 s."""

ROLLBACK_LIMIT_S = 3.0
FAULT_WAIT_S = 15.0


def test_coap_update_completes_and_is_verified(agent, record_measurement):
    running = agent.hello()["model"]
    target = "v1" if running["sha256"] == agent.ota.manifest("v2", agent.device)["sha256"] else "v2"
    result = agent.update(target, delta=True, allow_downgrade=True)  # v2 -> v1 on a second run
    assert result.ok, f"device {agent.name}: update to {result.target} failed: {result.detail}"
    assert agent.hello()["model"]["sha256"] == agent.ota.manifest(target, agent.device)["sha256"]
    record_measurement("update_transfer", result.transfer_ms, "ms")
    record_measurement("update_switch", result.switch_ms, "ms")
    record_measurement("update_bytes", result.bytes, "B")


def test_forged_signature_is_refused_and_the_model_kept(agent):
    running = agent.hello()["model"]
    forged = "forged-v1" if running["sha256"] == agent.ota.manifest("v2", agent.device)["sha256"] else "forged-v2"
    result = agent.update(forged)
    assert not result.ok, f"device {agent.name}: a model with a forged signature was accepted"
    assert result.kept_previous, f"device {agent.name}: the running model was lost: {result.detail}"
    fault = agent.next_fault(FAULT_WAIT_S)
    assert fault["kind"] == "signature", f"device {agent.name}: fault {fault}"


def test_crashing_model_is_rolled_back_within_3_s(agent, record_measurement):
    running = agent.hello()["model"]
    agent.update("crash")
    fault = agent.next_fault(FAULT_WAIT_S)
    while fault["kind"] not in ("rollback", "crash"):
        fault = agent.next_fault(FAULT_WAIT_S)
    assert agent.hello()["model"]["sha256"] == running["sha256"], f"device {agent.name}: the previous model is gone"
    rollback_s = fault.get("rollback_us", 0) / 1e6
    since_switch_s = (fault["t_fault"] - fault["t_switch"]) / 1e6 if "t_switch" in fault else 0.0
    record_measurement("rollback_time", rollback_s * 1000, "ms")
    record_measurement("fault_after_switch", since_switch_s * 1000, "ms")
    assert since_switch_s + rollback_s <= ROLLBACK_LIMIT_S, (
        f"device {agent.name}: rolled back {since_switch_s + rollback_s:.2f} s after the switch "
        f"(limit {ROLLBACK_LIMIT_S:g} s)"
    )
