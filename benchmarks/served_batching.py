"""Server-side batching measured: concurrent clients against a stand-in batching server.

Run: .venv/bin/python benchmarks/served_batching.py --saved-model BASE/N --test TSV
         [--clients 1,8,32] [--seconds 15] [--setting NAME=MAX,TIMEOUT_US,THREADS ...]
         [--signature serving_default]

No ``tensorflow_model_server`` binary installs on these machines, so this process
stands in for it: it loads the SavedModel with the session loader that the C++
server uses and batches concurrent requests the way TF Serving's
``BasicBatchScheduler`` does with a ``BatchingParameters`` file:

- a request joins the open batch; the batch closes when it holds
  ``max_batch_size`` sentences or ``batch_timeout_micros`` after its first request
  arrived, whichever comes first;
- ``num_batch_threads`` threads run closed batches, each padded up to the next of
  ``allowed_batch_sizes`` (by repeating its first text, as the server pads);
- with batching off, every request runs alone on the caller's thread.

Each client is a thread that sends one sentence a request and waits for the answer
(a closed loop), cycling through the test sources. For every setting and client
count the table gives sentences/s and the median and 99th-percentile latency over
``--seconds`` of requests; the settings are measured round by round in the same
process. ``session.run`` releases Python's lock, so the threads run the graph
concurrently as the server's would.
"""

import argparse
import concurrent.futures
import os
import queue
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench

# name -> (max_batch_size, batch_timeout_micros, num_batch_threads); None: off.
DEFAULT_SETTINGS = {
    "no batching": None,
    "32, 2 ms, 2 threads": (32, 2000, 2),
    "32, 5 ms, 2 threads": (32, 5000, 2),
    "32, 5 ms, 4 threads": (32, 5000, 4),
}


def allowed_sizes(max_batch_size, smallest=8):
    """Powers of two from ``smallest`` up to ``max_batch_size``: allowed_batch_sizes."""
    sizes = [s for s in (1, 2, 4, 8, 16, 32, 64, 128) if smallest <= s < max_batch_size]
    return [*sizes, max_batch_size]


class Model:
    """The SavedModel under the session loader; one signature, texts in, out."""

    def __init__(self, saved_model_dir, signature):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (the server links its ops)

        self.session = tf.compat.v1.Session(graph=tf.Graph())
        meta = tf.compat.v1.saved_model.loader.load(
            self.session, ["serve"], str(saved_model_dir)
        )
        spec = meta.signature_def[signature]
        self.feed = spec.inputs["text"].name
        self.fetch = spec.outputs[max(spec.outputs)].name  # translation(s)

    def run(self, texts):
        return list(self.session.run(self.fetch, {self.feed: texts}))


class Batcher:
    """TF Serving's basic batch scheduler, in Python (see the module docstring)."""

    def __init__(self, model, max_batch_size, timeout_micros, threads, smallest=8):
        self.model, self.max_batch_size = model, max_batch_size
        self.timeout = timeout_micros * 1e-6
        self.sizes = allowed_sizes(max_batch_size, smallest)
        self.lock = threading.Condition()
        self.open, self.opened_at = [], None
        self.closed = queue.Queue()
        self.stopping = False
        self.workers = [threading.Thread(target=self._work) for _ in range(threads)]
        self.closer = threading.Thread(target=self._close_on_timeout)
        for thread in [*self.workers, self.closer]:
            thread.daemon = True
            thread.start()

    def submit(self, text):
        future = concurrent.futures.Future()
        with self.lock:
            if not self.open:
                self.opened_at = time.perf_counter()
                self.lock.notify_all()
            self.open.append((text, future))
            if len(self.open) >= self.max_batch_size:
                self._close()
        return future

    def _close(self):
        self.closed.put(self.open)
        self.open, self.opened_at = [], None

    def _close_on_timeout(self):
        with self.lock:
            while not self.stopping:
                if not self.open:
                    self.lock.wait(0.05)
                    continue
                left = self.opened_at + self.timeout - time.perf_counter()
                if left <= 0:
                    self._close()
                else:
                    self.lock.wait(left)

    def _work(self):
        while True:
            batch = self.closed.get()
            if batch is None:
                return
            texts = [text for text, _ in batch]
            size = next(s for s in self.sizes if s >= len(texts))
            outputs = self.model.run(texts + [texts[0]] * (size - len(texts)))
            for (_, future), output in zip(batch, outputs):
                future.set_result(output)

    def stop(self):
        with self.lock:
            self.stopping = True
            self.lock.notify_all()
        for _ in self.workers:
            self.closed.put(None)


def measure(model, setting, texts, clients, seconds):
    """(sentences/s, median latency s, p99 latency s) of ``clients`` closed loops."""
    batcher = None if setting is None else Batcher(model, *setting)

    def answer(text):
        if batcher is None:
            return model.run([text])[0]
        return batcher.submit(text).result()

    latencies = [[] for _ in range(clients)]
    start = time.perf_counter()
    deadline = start + seconds

    def client(index):
        i = index
        while time.perf_counter() < deadline:
            sent = time.perf_counter()
            answer(texts[i % len(texts)])
            latencies[index].append(time.perf_counter() - sent)
            i += clients

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if batcher is not None:
        batcher.stop()
    every = [x for per_client in latencies for x in per_client]
    return (
        len(every) / elapsed,
        _bench.percentile(every, 50),
        _bench.percentile(every, 99),
    )


def _setting(text):
    name, values = text.split("=", 1)
    if values == "none":
        return name, None
    return name, tuple(int(v) for v in values.split(","))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--saved-model", required=True, help="an exported BASE/N")
    parser.add_argument("--test", required=True, help="the test TSV (sources)")
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--signature", default="serving_default")
    parser.add_argument(
        "--setting",
        action="append",
        type=_setting,
        help="NAME=MAX_BATCH,TIMEOUT_US,THREADS[,SMALLEST_ALLOWED] or NAME=none",
    )
    args = parser.parse_args(argv)
    from keras_selfattn.text import read_pairs

    texts = [source for source, _ in read_pairs(args.test)]
    settings = dict(args.setting) if args.setting else DEFAULT_SETTINGS
    model = Model(args.saved_model, args.signature)
    for size in allowed_sizes(32, 1):  # warm every padded shape once
        model.run(texts[:size])
    clients = [int(c) for c in args.clients.split(",")]
    results = {}
    for r in range(args.rounds):
        names = list(settings) if r % 2 == 0 else list(settings)[::-1]
        for count in clients:
            for name in names:
                result = measure(model, settings[name], texts, count, args.seconds)
                results.setdefault((name, count), []).append(result)
    print_results(args, settings, clients, results)


def print_results(args, settings, clients, results):
    rows = []
    for count in clients:
        base = (
            _bench.median(r[0] for r in results[("no batching", count)])
            if ("no batching" in settings)
            else None
        )
        for name in settings:
            speed, p50, p99 = (
                _bench.median(r[i] for r in results[(name, count)]) for i in range(3)
            )
            rows.append(
                [
                    str(count),
                    name,
                    f"{speed:.1f}",
                    f"**{speed / base:.2f}**" if base else "",
                    f"{1000 * p50:.0f}",
                    f"{1000 * p99:.0f}",
                ]
            )
    print()
    print(
        f"{args.signature}, one sentence a request, closed-loop clients, "
        f"{args.seconds:.0f} s per cell (setting: max_batch_size, "
        "batch_timeout_micros, num_batch_threads):"
    )
    print()
    _bench.print_table(
        [
            "clients",
            "batching",
            "sentences/s",
            "/ no batching",
            "p50 latency ms",
            "p99 latency ms",
        ],
        rows,
    )
    print()
    print(f"median of {args.rounds} round(s); {_bench.environment_line()}")
    print(f"command: {_bench.command_line(__file__, sys.argv[1:])}")


if __name__ == "__main__":
    main()
