"""What the bank runs with nobody at the keyboard, as ``python3 -m taobank`` (``scripts/`` on ``PYTHONPATH``):

  python3 -m taobank supervise SWEEP_ID [--interval SECONDS]

a Docker sweep's supervisor, started detached by submit (and again by a status that finds it gone); it starts
held trials as slots free until every trial has ended (:func:`taobank.campaign.sweeps.supervise`).
"""
from __future__ import annotations

import sys

USAGE = "usage: python3 -m taobank supervise SWEEP_ID [--interval SECONDS]"


def main(argv: list[str]) -> int:
    from .errors import TaoError
    from .text import error_line

    if len(argv) not in (2, 4) or argv[0] != "supervise" or (len(argv) == 4 and argv[2] != "--interval"):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        interval = float(argv[3]) if len(argv) == 4 else None
    except ValueError:
        interval = None
    if len(argv) == 4 and not (interval and interval > 0):
        print(error_line("--interval must be a positive number of seconds"), file=sys.stderr)
        return 2
    from .campaign import sweeps

    try:
        kwargs = {"interval": interval} if interval else {}
        return sweeps.supervise(argv[1], on_line=lambda line: print(line, flush=True), **kwargs)
    except TaoError as exc:
        print(error_line(exc), file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
