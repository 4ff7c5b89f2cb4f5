"""One set of machine ceilings for the whole course: measured once, kept in a JSON file, its age shown."""

from __future__ import annotations

import json
import pickle
import time

import pytest

from inferlab import cost, i18n, kept, measure
from inferlab.measure import machine


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A cache folder of this test's own (never the learner's), no profile in this process, and a fake measurement
    that counts its calls: each returns the next of ``spreads`` (default: quiet runs). A spot check (``repeats ==
    SPOT_REPEATS``) is counted apart, in ``spots``, and reads the next of ``spot_rates`` (bandwidth, matmul), by
    default the last profile measured (the machine has not changed speed)."""
    monkeypatch.setenv("INFERLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(machine, "_PROFILES", {})
    monkeypatch.setattr(i18n, "_chosen", "en")
    calls: list[float] = []

    def fake_measure(device, dtype, repeats, **sizes):
        if repeats == machine.SPOT_REPEATS:
            fake_measure.spots.append(sizes)
            bw, mm = fake_measure.spot_rates.pop(0) if fake_measure.spot_rates else (10e9 * len(calls), 100e9)
            return cost.MachineProfile(str(device), "float32", bw, mm, sizes["copy_mb"], sizes["matmul_n"],
                                       runs=repeats, bytes_per_s_range=(bw, bw), flops_per_s_range=(mm, mm))
        calls.append(len(calls) + 1)
        bw = 10e9 * len(calls)  # a different bandwidth each time, so a re-measurement shows
        spread = fake_measure.spreads.pop(0) if fake_measure.spreads else 0.05
        return cost.MachineProfile(str(device), "float32", bw, 100e9, 256, 1024, runs=repeats,
                                   bytes_per_s_range=(bw / (1 + spread), bw), flops_per_s_range=(95e9, 100e9))

    fake_measure.spreads, fake_measure.spots, fake_measure.spot_rates = [], [], []
    monkeypatch.setattr(machine, "measure_machine", fake_measure)
    fake_measure.calls = calls
    return fake_measure


def test_measured_once_then_read_back_in_a_new_process(fresh, monkeypatch):
    first = measure.machine_profile("cpu")
    assert fresh.calls == [1] and first.source == "measured" and first.bytes_per_s == 10e9
    saved = json.loads(machine.profile_file().read_text(encoding="utf-8"))  # plain JSON
    assert saved["format"] == machine.FORMAT and len(saved["profiles"]) == 1
    key = json.loads(next(iter(saved["profiles"])))
    assert set(key) == {"cpu", "cores", "threads", "torch", "device", "gpu", "dtype"} and key["device"] == "cpu"

    monkeypatch.setattr(machine, "_PROFILES", {})  # a new kernel: another notebook
    again = measure.machine_profile("cpu")
    assert fresh.calls == [1] and again.source == "saved"  # read back, not measured
    assert fresh.spots == [{"copy_mb": 256, "matmul_n": 1024}]  # ... but spot-checked, at the profile's own sizes
    assert again.bytes_per_s == first.bytes_per_s and again.bytes_per_s_range == first.bytes_per_s_range
    assert again.measured_at == first.measured_at and again.machine == first.machine
    assert again.spread == pytest.approx(first.spread) and again.ridge == pytest.approx(first.ridge)


def test_another_machine_measures_anew(fresh, monkeypatch):
    measure.machine_profile("cpu")
    monkeypatch.setattr(machine, "_PROFILES", {})
    monkeypatch.setattr(kept, "cpu_name", lambda: "Some Other CPU")
    other = measure.machine_profile("cpu")
    assert fresh.calls == [1, 2] and other.source == "measured" and "Some Other CPU" in other.machine
    assert len(json.loads(machine.profile_file().read_text())["profiles"]) == 2  # both kept


def test_refresh_measures_again_and_replaces_the_saved_one(fresh, monkeypatch):
    measure.machine_profile("cpu")
    again = measure.machine_profile("cpu", refresh=True)
    assert fresh.calls == [1, 2] and again.bytes_per_s == 20e9 and measure.machine_profile("cpu") is again
    monkeypatch.setattr(machine, "_PROFILES", {})
    assert measure.machine_profile("cpu").bytes_per_s == 20e9 and fresh.calls == [1, 2]


def test_a_disturbed_measurement_is_used_but_not_saved(fresh, monkeypatch):
    fresh.spreads = [0.58]
    busy = measure.machine_profile("cpu")
    assert busy.spread["bandwidth"] == pytest.approx(0.58) and not machine.profile_file().exists()
    monkeypatch.setattr(machine, "_PROFILES", {})
    assert measure.machine_profile("cpu").source == "measured" and fresh.calls == [1, 2]  # the next run re-measures


def test_its_age_in_words_and_in_its_repr(fresh):
    now = time.time()
    prof = machine.SavedProfile("cpu", "float32", 20e9, 100e9, 256, 1024, (19e9, 20e9), (90e9, 100e9), 7,
                                measured_at=now - 3 * 86400 - 60, machine="AMD EPYC, 2 threads")
    assert prof.age(now) == "3 days ago"
    assert prof.age(prof.measured_at + 5) == "just now"
    assert prof.age(prof.measured_at + 600) == "10 minutes ago"
    assert prof.age(prof.measured_at + 5 * 3600) == "5 hours ago"
    text = repr(prof)
    assert "20.0 GB/s copy bandwidth" in text and "measured 3 days ago (" in text and "on AMD EPYC, 2 threads" in text
    assert text.endswith("machine_profile(refresh=True) re-measures")
    i18n.set_language("zh")
    assert "3 天前" in repr(prof) and "machine_profile(refresh=True) 会重新测量" in repr(prof)
    i18n.set_language("en")
    assert "measured just now" in repr(measure.machine_profile("cpu"))  # what a notebook prints under the ceilings


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"format": 99, "profiles": {}}',
                                     b"\x80\x04\x95 binary", b'{"profiles": 3}'],
                         ids=["truncated", "a list", "another format", "binary", "no format"])
def test_a_corrupt_or_foreign_file_is_ignored_with_a_clear_message(fresh, content):
    path = machine.profile_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    with pytest.warns(UserWarning, match=r"machine_profile: ignored .*machine_profile\.json .*measured again"):
        prof = measure.machine_profile("cpu")
    assert fresh.calls == [1] and prof.source == "measured"
    assert json.loads(path.read_text())["format"] == machine.FORMAT  # rewritten as a profile file


def test_a_damaged_entry_is_measured_again(fresh, monkeypatch):
    measure.machine_profile("cpu")
    path = machine.profile_file()
    data = json.loads(path.read_text())
    for entry in data["profiles"].values():
        entry["bytes_per_s"] = "fast"  # a wrong type
    path.write_text(json.dumps(data))
    monkeypatch.setattr(machine, "_PROFILES", {})
    assert measure.machine_profile("cpu").source == "measured" and fresh.calls == [1, 2]


class _Trap:
    """Unpickling this runs code: what a pickle can do, and what the profile file must never allow."""

    ran = False

    def __reduce__(self):
        return (_Trap._spring, ())

    @staticmethod
    def _spring():
        _Trap.ran = True
        return {"format": machine.FORMAT, "profiles": {}}


def test_never_unpickles(fresh):
    path = machine.profile_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(_Trap()))
    with pytest.warns(UserWarning, match="ignored"):
        measure.machine_profile("cpu")
    assert not _Trap.ran and fresh.calls == [1]
    assert json.loads(path.read_text(encoding="utf-8"))["format"] == machine.FORMAT  # written as JSON, not pickled


# ----------------------------------------------------------------------------- the spot check (gate rule 'stale')
@pytest.fixture
def shown(monkeypatch):
    """The gate's records as a kernel would show them, at the lesson's scale."""
    from inferlab import gate, scale

    out: list[tuple[dict, dict]] = []
    monkeypatch.setattr(gate, "_kernel_display", lambda: lambda data, raw, metadata: out.append((data, metadata)))
    monkeypatch.setenv(scale.ENV, "full")
    gate.forget()
    yield out
    gate.forget()


def _new_process(monkeypatch):
    monkeypatch.setattr(machine, "_PROFILES", {})


def test_a_saved_profile_that_agrees_with_the_spot_check_is_quoted(fresh, monkeypatch, shown):
    measure.machine_profile("cpu")
    _new_process(monkeypatch)
    fresh.spot_rates = [(10e9 * 0.9, 100e9 * 1.1)]  # 10% slower copy, 10% faster matmul: within 15%
    prof = measure.machine_profile("cpu")
    assert prof.source == "saved" and fresh.calls == [1] and len(fresh.spots) == 1
    spot = [m["inferlab"]["evidence"] for _, m in shown if m["inferlab"]["evidence"]["kind"] == "spot"]
    assert spot == [{"kind": "spot", "what": "cpu float32", "measured_at": prof.measured_at,
                     "stored_bytes_per_s": 10e9, "stored_flops_per_s": 100e9, "bytes_per_s": 9e9,
                     "flops_per_s": pytest.approx(110e9), "quoted_bytes_per_s": 10e9, "quoted_flops_per_s": 100e9,
                     "refreshed": False}]
    assert all(d == {"text/plain": ""} for d, _ in shown)  # a quiet run: no banner
    measure.machine_profile("cpu")
    assert len(fresh.spots) == 1  # once per process


@pytest.mark.parametrize("rates", [(10e9, 100e9 * 0.78), (10e9 * 1.2, 100e9)],
                         ids=["matmul 22% slower", "copy 20% faster"])
def test_a_saved_profile_the_spot_check_contradicts_is_measured_again(fresh, monkeypatch, shown, rates):
    measure.machine_profile("cpu")
    _new_process(monkeypatch)
    fresh.spot_rates = [rates, (20e9, 100e9)]  # the first check disagrees; the second process's agrees with the new
    prof = measure.machine_profile("cpu")
    assert prof.source == "measured" and fresh.calls == [1, 2] and prof.bytes_per_s == 20e9
    (spot,) = [m["inferlab"]["evidence"] for _, m in shown if m["inferlab"]["evidence"]["kind"] == "spot"]
    assert spot["refreshed"] and spot["quoted_bytes_per_s"] == 20e9 and spot["stored_bytes_per_s"] == 10e9
    _new_process(monkeypatch)
    assert measure.machine_profile("cpu").bytes_per_s == 20e9 and fresh.calls == [1, 2]  # the new one was saved


def test_a_live_run_whose_spot_check_disagrees_quotes_a_fresh_profile_and_no_banner(fresh, monkeypatch, shown):
    """The check disagreed, so the run measured the machine again and quotes that: its own measurement, which the
    ``spread`` rule judges. A one-second check a few percent off a best-of-7 is that check's noise, not a disturbance
    (the banner for a disagreeing profile quoted anyway is ``test_gate``'s)."""
    measure.machine_profile("cpu")
    _new_process(monkeypatch)
    fresh.spot_rates = [(5e9, 100e9)]  # half the stored copy rate, and half the new measurement's (20 GB/s) too
    quoted = measure.machine_profile("cpu")
    record, text = next((m["inferlab"]["evidence"], d["text/plain"]) for d, m in shown
                        if m["inferlab"]["evidence"]["kind"] == "spot")
    assert record["refreshed"] and record["quoted_bytes_per_s"] == quoted.bytes_per_s
    assert "This run was disturbed" not in text
