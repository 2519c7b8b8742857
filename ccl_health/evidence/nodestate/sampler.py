"""Readings of the node's state taken while something runs on the GPUs
(the hook's probes), in a thread: what judges a GPU's PCIe link under load
(:func:`ccl_health.evidence.nodestate.diagnose.under_load`: NVIDIA and AMD
GPUs lower their link's generation while idle, so the link is judged on
the fastest and widest seen while a probe keeps them busy).

    sampler = Sampler(lambda: nodestate.read(run_id=..., light=True)).start()
    ...                        # the probes
    readings = sampler.stop()

A reading that raises is left out (the sampler never costs the check its
verdict); at most ``keep`` readings are kept (the latest replace the
oldest but the first)."""

import threading
import time

#: seconds between two readings (a light NVML reading of 8 GPUs takes a
#: few tens of milliseconds)
INTERVAL = 0.25
KEEP = 400


class Sampler:
    def __init__(self, read, interval=INTERVAL, keep=KEEP, seconds=None):
        self.read, self.interval, self.keep = read, interval, keep
        #: it stops by itself after this many seconds (a caller that never
        #: stops it: an exception, a signal) where given
        self.seconds = seconds
        self.readings = []
        self._stop = threading.Event()
        self._thread = None
        self._lock = threading.Lock()

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='ccl-health-sampler')
        self._thread.start()
        return self

    def _run(self):
        end = None if self.seconds is None else \
            time.monotonic() + self.seconds
        while not self._stop.is_set() and (end is None or
                                           time.monotonic() < end):
            t0 = time.monotonic()
            try:
                state = self.read()
            except Exception:          # noqa: BLE001 -- never the verdict's
                state = None
            if state is not None and getattr(state, 'checked', False):
                with self._lock:
                    self.readings.append(state)
                    if len(self.readings) > self.keep:
                        del self.readings[1]
            self._stop.wait(max(0.0, self.interval -
                                (time.monotonic() - t0)))

    def stop(self, timeout=1.0):
        """Stop and return the readings taken (the one in progress is
        waited for up to ``timeout`` seconds)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._lock:
            return list(self.readings)
