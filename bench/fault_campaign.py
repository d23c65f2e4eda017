"""The fault campaign: inject faults into a running ``isrwatch run`` and check that it
loses and doubles nothing (docs/faults.md).

    python bench/fault_campaign.py --mode short            # CI-sized: the default faults
    python bench/fault_campaign.py --mode long --faults kill,outage,backlog

Each fault kind is a module of ``bench/faults/`` named in ``bench/faults/registry.py``;
this script only picks them, runs them one after the other, prints a table of figures
(restarts survived, events lost, events doubled, outage seconds survived, sink duplicates
per fault) and the checks, and exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # this tree's streaming, not an installed one
    sys.path.insert(0, str(ROOT))

from faults import registry  # noqa: E402
from faults.fault import FaultResult, Mode  # noqa: E402
from faults.report import checks, table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mode", choices=[m.value for m in Mode], default=Mode.SHORT.value)
    parser.add_argument(
        "--faults",
        default=",".join(registry.DEFAULT),
        help=f"comma-separated, of: {', '.join(registry.MODULES)}",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where checkpoints and job logs go (default: a temporary directory)",
    )
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.faults.split(",") if name.strip()]
    unknown = [name for name in names if name not in registry.MODULES]
    if unknown:
        parser.error(f"unknown faults {unknown}; known: {list(registry.MODULES)}")
    mode = Mode(args.mode)
    with tempfile.TemporaryDirectory(prefix="isrwatch-faults-") as scratch:
        workdir = args.workdir or Path(scratch)
        results: list[FaultResult] = []
        for name in names:
            fault = registry.fault(name)
            print(f"== {name} ({mode.value}): {fault.summary}", flush=True)
            begun = time.monotonic()
            try:
                result = fault.run(mode, workdir / name, args.seed)
            except Exception as error:  # the campaign goes on and reports it as a failure
                traceback.print_exc()
                result = FaultResult(name)
                result.comparison.check("the fault ran to its end", False, repr(error))
            print(
                f"== {name}: {'pass' if result.passed else 'FAIL'} in "
                f"{time.monotonic() - begun:.0f} s",
                flush=True,
            )
            results.append(result)
    print()
    print(table(results))
    print()
    print(checks(results))
    failed = [r.name for r in results if not r.passed]
    print(f"\nresult: {'FAIL: ' + ', '.join(failed) if failed else 'every check passed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
