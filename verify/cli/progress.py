"""Progress in a log: where standard error is not a terminal (CI, ``make demo > log``), a
long command still says how far it has got, as one plain line of text at least every
:data:`EVERY` seconds (tqdm's line: what it does, how many of how many, the elapsed time),
and a last line when it ends; a command that ends sooner prints nothing. On a terminal the
bar is tqdm's own, redrawn in place (:func:`verify.cli.common.progress_bar` picks)."""

from __future__ import annotations

import sys
import threading
import time

from tqdm import tqdm

#: at most this many seconds between two lines of progress in a log (and before the first)
EVERY = 30.0
#: how often a bar wakes to see whether a line is due: a line comes EVERY - BEAT seconds
#: after the last, and at most BEAT seconds late
BEAT = EVERY / 6


class _Discard:
    """Where tqdm's own in-place drawing goes (carriage returns, clearing): nowhere."""

    def write(self, text: str) -> None:
        pass

    def flush(self) -> None:
        pass


class LogBar(tqdm):
    """A tqdm bar for a log: its state as one line (no carriage return) at most
    :data:`EVERY` seconds after it started or wrote its last line, and once more when it
    closes if it wrote any. A thread wakes it every :data:`BEAT` seconds, so that a line
    comes while no step ends (one check that runs for minutes)."""

    def __init__(self, *args, file=None, **kwargs):
        self._log = file or sys.stderr
        self._started = time.monotonic()
        self._last: float | None = None   # when the last line was written
        self._stop = threading.Event()
        kwargs.update(disable=False, mininterval=BEAT)
        super().__init__(*args, file=_Discard(), **kwargs)
        self._heart = threading.Thread(target=self._beat, daemon=True)
        self._heart.start()

    def _beat(self) -> None:
        while not self._stop.wait(BEAT):
            self.refresh()

    def display(self, msg=None, pos=None):
        if msg == "":   # tqdm clears its line: a log has nothing to clear
            return True
        closing = self.disable   # close() disables the bar before its last display
        now = time.monotonic()
        if closing and self._last is None:
            return True
        if not closing and now - (self._last or self._started) < EVERY - BEAT:
            return True
        self._last = now
        self._log.write(str(self) + "\n")
        self._log.flush()
        return True

    def close(self):
        self._stop.set()
        super().close()
