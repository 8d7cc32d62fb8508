"""What the spaCy parse cache costs and saves, on the turns of the first LongMemEval-S haystacks.

The lite extractors (FraCom, CAST, HingeMem) parse every turn; across 499 haystacks that share
~23% of their turns, and across methods and worker processes, :class:`memsys.nlp.ParseCache`
makes each distinct turn one parse per machine. Timed here, per turn: parsing (the pipeline, in
the batches the extractors use), storing (serialize, compress, SQLite write) and loading (SQLite
read, decompress, deserialize, through a second instance's cache), with the stored size, and a check that
every loaded parse carries the same annotations as the parse it was stored from.

    .venv/bin/python scripts/bench_parse_cache.py [--haystacks 4]
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

from benchmarks.data.longmemeval import iter_longmemeval
from memsys.nlp import NLP, ParseCache, annotations, load_pipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--haystacks", type=int, default=4)
    args = parser.parse_args()
    haystacks = list(itertools.islice(iter_longmemeval("s"), args.haystacks))
    texts = list(dict.fromkeys(turn.text for haystack in haystacks for turn in haystack.turns))
    pipeline = load_pipeline()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "parses.sqlite"
        writer = NLP(cache=ParseCache(path), pipeline=pipeline)
        started = time.perf_counter()
        parsed = writer.parse(texts)
        total_s = time.perf_counter() - started
        writer.cache.close()  # folds the WAL into the file, so its size is what is stored
        size = path.stat().st_size
        reader = NLP(cache=ParseCache(path), pipeline=pipeline)
        started = time.perf_counter()
        loaded = reader.parse(texts)
        load_s = time.perf_counter() - started
    same = sum(annotations(a) == annotations(b) for a, b in zip(parsed, loaded, strict=True))
    count = len(texts)
    store_s = total_s - writer.parse_seconds
    print(f"{args.haystacks} haystacks: {count:,} distinct turns ({pipeline.meta['name']})")
    print(f"parse: {writer.parse_seconds / count * 1000:.2f} ms a turn (pipeline, batches of 256)")
    print(f"store: {store_s / count * 1000:.2f} ms a turn (serialize, zlib, SQLite)")
    print(f"load:  {load_s / count * 1000:.2f} ms a turn (SQLite, unzip, deserialize)")
    print(f"parse / load: {writer.parse_seconds / load_s:.0f}x")
    print(f"stored: {size / count / 1024:.1f} KiB a turn (the SQLite file)")
    print(f"same annotations after loading: {same:,} of {count:,}")
    print(f"reader parsed {reader.counts()['parsed']} turns")


if __name__ == "__main__":
    main()
