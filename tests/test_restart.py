from agentrt import Crash, RestartType, Strategy
from agentrt._restart import RestartIntensity


def test_restart_types_follow_otp() -> None:
    assert RestartType.PERMANENT.restarts_after(abnormal=False)
    assert RestartType.PERMANENT.restarts_after(abnormal=True)
    assert not RestartType.TRANSIENT.restarts_after(abnormal=False)
    assert RestartType.TRANSIENT.restarts_after(abnormal=True)
    assert not RestartType.TEMPORARY.restarts_after(abnormal=True)


def test_strategies_pick_siblings_in_start_order() -> None:
    children = ["a", "b", "c", "d"]
    assert Strategy.ONE_FOR_ONE.affected(children, "b") == ["b"]
    assert Strategy.ONE_FOR_ALL.affected(children, "b") == ["a", "b", "c", "d"]
    assert Strategy.REST_FOR_ONE.affected(children, "b") == ["b", "c", "d"]
    assert Strategy.REST_FOR_ONE.affected(children, "d") == ["d"]


def test_backoff_doubles_inside_the_window_and_is_capped() -> None:
    intensity = RestartIntensity(max_restarts=10, period=100.0, backoff=0.5, max_backoff=3.0)
    delays = [intensity.record(Crash("a", float(t), "boom")) for t in range(6)]
    assert delays == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]


def test_intensity_exceeded_then_window_slides() -> None:
    intensity = RestartIntensity(max_restarts=3, period=5.0, backoff=0.1)
    assert intensity.record(Crash("a", 0.0, "x")) == 0.1
    assert intensity.record(Crash("a", 1.0, "x")) == 0.2
    assert intensity.record(Crash("a", 2.0, "x")) == 0.4
    assert intensity.record(Crash("a", 3.0, "x")) is None
    assert [c.at for c in intensity.history] == [0.0, 1.0, 2.0, 3.0]
    # Crashes at 0..3 age out: at t=7.5 only 3.0 is still inside the 5 s window.
    assert intensity.record(Crash("a", 7.5, "x")) == 0.2
    assert [c.at for c in intensity.history] == [3.0, 7.5]
