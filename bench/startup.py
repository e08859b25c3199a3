"""How long `lineage --help` and `lineage walk` take to start and finish, wall clock, median of
several runs; `--checkout` times another source tree (e.g. an older commit) the same way.

    python -m bench.startup --database-url postgresql://postgres@127.0.0.1:5432/lineage_demo
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Runs `lineage` from the given tree even where an editable install points elsewhere.
FROM_CHECKOUT = (
    "import runpy, sys; "
    "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in type(f).__module__]; "
    "sys.path.insert(0, sys.argv.pop(1)); runpy.run_module('lineage', run_name='__main__')"
)


def timed(command: list[str], env: dict[str, str], runs: int) -> list[float]:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, env=env, check=True, capture_output=True)
        seconds.append(time.perf_counter() - started)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--checkout", type=Path, help="Source tree to time (default: this one).")
    parser.add_argument("--database-url", required=True, help="A database holding the demo.")
    arguments = parser.parse_args()
    env = dict(os.environ, LINEAGE_DATABASE_URL=arguments.database_url)
    lineage = [sys.executable, "-m", "lineage"]
    if arguments.checkout:
        lineage = [sys.executable, "-c", FROM_CHECKOUT, str(arguments.checkout.resolve())]
    for name, argv in (
        ("lineage --help", ["--help"]),
        ("lineage walk answer_1 --format json", ["walk", "answer_1", "--format", "json"]),
    ):
        seconds = timed(lineage + argv, env, arguments.runs)
        print(
            f"{name:40} median {statistics.median(seconds):.3f} s  "
            f"min {min(seconds):.3f} s  ({arguments.runs} runs)"
        )


if __name__ == "__main__":
    main()
