"""How fast the reachability watch (streaming/job/reachability.py) sees each kind of broker
outage the fault proxy makes, and how fast it sees the broker again (docs/faults.md).

    python bench/reachability_bench.py --trigger-ms 1000 --rounds 3

Tansu behind ``streaming/tools/fault_proxy.py``, one watch with the job's timing rule for the
trigger given. Each round switches the proxy to ``refuse``, ``hang`` and ``drop`` in
turn, each for a few seconds and back to ``pass``, and prints per outage: when the first
failed check ended after the switch, whether every check failed while it lasted, and
when the first answered check ended after the proxy passed again. Then one chained
outage (refuse, hang, drop, as the campaign runs them) without a pass in between.
Times are the watch's own (when a check ended), not a poller's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # this tree's streaming, not an installed one
    sys.path.insert(0, str(ROOT))

from faults.harness import broker_stack  # noqa: E402

from streaming.job.reachability import Reachability, ReachabilityWatch, watch_timing  # noqa: E402
from streaming.tools.fault_proxy import ProxyMode  # noqa: E402

OUTAGES = (ProxyMode.REFUSE, ProxyMode.HANG, ProxyMode.DROP)
HOLD_S = 3.0  # how long each outage lasts after it was first seen
PATIENCE_S = 60.0


def first_state(watch: ReachabilityWatch, reachable: bool, after: float) -> Reachability | None:
    """The first outcome with ``reachable`` of a check that ended after ``after``."""
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        state = watch.state
        if state is not None and state.reachable is reachable and state.checked_at >= after:
            return state
        time.sleep(0.01)
    return None


def held(watch: ReachabilityWatch, seconds: float) -> int:
    """Answered checks seen while polling for ``seconds``."""
    answered, seen = 0, None
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        state = watch.state
        if state is not None and state is not seen:
            answered += state.reachable
            seen = state
        time.sleep(0.01)
    return answered


def late(state: Reachability | None, since: float) -> str:
    return "never" if state is None else f"{state.checked_at - since:.2f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trigger-ms", type=int, default=1000)
    parser.add_argument("--request-timeout-ms", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    timing = watch_timing(args.trigger_ms, args.request_timeout_ms)
    print(
        f"trigger {args.trigger_ms} ms: check timeout {timing.timeout_ms:g} ms, interval "
        f"{timing.interval_ms:g} ms, bound {timing.detection_bound_s:.2f} s"
    )
    with broker_stack(with_proxy=True) as (_, proxy):
        assert proxy is not None
        watch = ReachabilityWatch({"bootstrap.servers": proxy.address}, timing).start()
        try:
            if first_state(watch, True, 0.0) is None:
                raise RuntimeError("the watch never reached the broker")
            for round_ in range(1, args.rounds + 1):
                for mode in OUTAGES:
                    time.sleep(1.0)
                    began = time.time()
                    proxy.set_mode(mode)
                    down = first_state(watch, False, began)
                    answered = held(watch, HOLD_S)
                    back = time.time()
                    proxy.set_mode(ProxyMode.PASS)
                    up = first_state(watch, True, back)
                    print(
                        f"round {round_} {mode:6}: down after {late(down, began)}, "
                        f"{answered} checks answered in the next {HOLD_S:g} s, "
                        f"up after {late(up, back)}",
                        flush=True,
                    )
            time.sleep(1.0)
            began = time.time()
            answered = 0
            for mode in OUTAGES:
                proxy.set_mode(mode)
                if mode is OUTAGES[0]:
                    down = first_state(watch, False, began)
                answered += held(watch, HOLD_S)
            back = time.time()
            proxy.set_mode(ProxyMode.PASS)
            up = first_state(watch, True, back)
            print(
                f"chained refuse-hang-drop: down after {late(down, began)}, {answered} checks "
                f"answered in it, up after {late(up, back)}"
            )
        finally:
            watch.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
