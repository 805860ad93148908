"""micropython/npcmodels.py under CPython: probation rollback on MemoryError and on crashes."""

import npcmodels
import pytest
from npcclock import Clock


class Net:
    """A model whose inference returns a fixed decision or raises `error`."""

    weight_bytes = 100

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error

    def infer(self, x):
        if self.error is not None:
            raise self.error
        return 3, 0.5, [0] * 8


def models_with(first: Net, second: Net) -> tuple[npcmodels.Models, list[dict]]:
    faults: list[dict] = []
    models = npcmodels.Models(None, Clock(), faults.append)
    models.switch(npcmodels.Loaded(first, {"version": 1}, "a.npcm"))
    models.prev = None  # the first model has nothing to roll back to
    models.switch(npcmodels.Loaded(second, {"version": 2}, "b.npcm"))
    return models, faults


def test_memory_error_in_probation_rolls_back_and_reruns_on_the_previous_model():
    models, faults = models_with(Net(), Net(MemoryError("alloc")))
    result, model = models.infer([0.0] * 48)
    assert result[0] == 3 and model.version == 1 and models.current.version == 1
    (fault,) = faults
    assert fault["kind"] == "rollback" and fault["cause"] == "oom"
    assert fault["model"] == {"version": 2} and fault["prev"] == {"version": 1}
    assert fault["rollback_us"] >= 0 and fault["t_fault"] >= fault["t_start"] >= fault["t_switch"]
    assert models.counts["rollbacks"] == 1


def test_after_probation_a_crash_is_reported_and_raised(monkeypatch):
    monkeypatch.setattr(npcmodels, "PROBATION_US", 0)
    models, faults = models_with(Net(), Net(IndexError("boom")))
    with pytest.raises(IndexError):
        models.infer([0.0] * 48)
    assert faults[0]["kind"] == "crash" and models.current.version == 2 and models.prev is None
