"""Kill ``ragcal reproduce`` half-way, run it again, and compare every output with a clean run's.

Usage (from the checkout, after ``make reproduce`` has written the reference results/ and figures/)::

    .venv/bin/python benchmarks/killed_reproduce.py --kill-after 300

1. ``ragcal reproduce`` writes into a scratch folder (results, figures, executed notebooks) and is killed with
   SIGKILL (its whole process group: the notebook kernels too) after ``--kill-after`` seconds.
2. Every file it left is checked: no temporary file, and each CSV, JSON and PNG parses whole.
3. The same command runs again, to the end.
4. Every file of results/ and figures/ is compared byte for byte with the reference (the checkout's, by default).
   Executed notebooks are compared without their images (compared as figures), execution counts and metadata,
   and without the cell that passes the scratch figures folder in.

It prints a summary and exits 1 on any difference. Not a test: a full reproduce takes about 14 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def reproduce_command(folder: Path) -> list[str]:
    ragcal = Path(sys.executable).with_name("ragcal")
    return [
        str(ragcal), "reproduce", "--results", str(folder / "results"), "--figures", str(folder / "figures"),
        "--executed-notebooks", str(folder / "notebooks"),
    ]


def run(command, *, kill_after=None, log: Path) -> int:
    with open(log, "ab") as output:
        process = subprocess.Popen(command, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return process.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return -signal.SIGKILL


def partial_files(folder: Path) -> list[str]:
    """Files that are temporary or do not parse whole."""
    problems = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = path.relative_to(folder)
        if path.name.endswith(".tmp"):
            problems.append(f"{name}: temporary file left behind")
            continue
        try:
            if path.suffix == ".json" or path.suffix == ".ipynb":
                json.loads(path.read_text(encoding="utf-8"))
            elif path.suffix == ".csv":
                import pandas as pd

                pd.read_csv(path)
            elif path.suffix == ".png":
                data = path.read_bytes()
                if not (data.startswith(b"\x89PNG") and data.endswith(b"IEND\xaeB`\x82")):
                    raise ValueError("not a whole PNG")
            elif path.suffix == ".svg" and not path.read_text(encoding="utf-8").rstrip().endswith("</svg>"):
                raise ValueError("not a whole SVG")
        except Exception as error:  # noqa: BLE001  (any failure to parse is what we report)
            problems.append(f"{name}: {type(error).__name__}: {error}")
    return problems


def notebook_text(path: Path) -> str:
    import re

    # A warning shown in a notebook names the kernel's temporary file (/tmp/ipykernel_<pid>/...): not an output.
    notebook = json.loads(re.sub(r"ipykernel_\d+", "ipykernel_N", path.read_text(encoding="utf-8")))
    # A scratch run passes its figures folder as an injected parameter cell, which shifts ids and counts.
    notebook["cells"] = [
        cell for cell in notebook.get("cells", []) if "injected-parameters" not in cell.get("metadata", {}).get("tags", [])
    ]
    for cell in notebook["cells"]:
        cell.pop("id", None)
        cell.pop("execution_count", None)
        cell.get("metadata", {}).pop("execution", None)
        for output in cell.get("outputs", []):
            output.get("data", {}).pop("image/png", None)
            output.get("metadata", {}).clear()
            output.pop("execution_count", None)
    return json.dumps(notebook, sort_keys=True)


def compare(produced: Path, reference: Path, *, notebooks: bool = False) -> tuple[int, list[str]]:
    files = sorted(
        p.relative_to(reference)
        for p in reference.rglob("*")
        if p.is_file() and not p.name.startswith(".") and (not notebooks or p.suffix == ".ipynb")
    )
    differ = []
    for name in files:
        mine, theirs = produced / name, reference / name
        if not mine.is_file():
            differ.append(f"{name}: missing")
        elif notebooks and name.suffix == ".ipynb":
            if notebook_text(mine) != notebook_text(theirs):
                differ.append(f"{name}: differs")
        elif mine.read_bytes() != theirs.read_bytes():
            differ.append(f"{name}: differs")
    return len(files), differ


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kill-after", type=float, default=300.0, help="seconds before SIGKILL (default 300)")
    parser.add_argument("--reference", type=Path, default=ROOT, help="folder with results/, figures/, notebooks/")
    parser.add_argument("--scratch", type=Path, default=None, help="where to write (default: a temporary folder)")
    parser.add_argument("--compare-only", action="store_true", help="only compare an earlier --scratch with the reference")
    args = parser.parse_args(argv)
    if args.compare_only:
        return report(args.scratch, args.reference, problems=[])
    folder = args.scratch or Path(tempfile.mkdtemp(prefix="ragcal-killed-"))
    log = folder / "reproduce.log"
    folder.mkdir(parents=True, exist_ok=True)
    command = reproduce_command(folder)

    started = time.monotonic()
    code = run(command, kill_after=args.kill_after, log=log)
    print(f"first run: exit {code} after {time.monotonic() - started:.0f} s (killed: {code == -signal.SIGKILL})")
    left = sum(1 for p in folder.rglob("*") if p.is_file() and p != log)
    problems = partial_files(folder)
    print(f"files left by the killed run: {left}; partial or temporary: {len(problems)}")
    for problem in problems:
        print(f"  {problem}")

    started = time.monotonic()
    code = run(command, log=log)
    print(f"second run: exit {code} after {time.monotonic() - started:.0f} s")
    if code != 0:
        print(f"the rerun failed; see {log}")
        return 1

    return report(folder, args.reference, problems=problems)


def report(folder: Path, reference: Path, *, problems) -> int:
    failed = bool(problems)
    for part, notebooks in (("results", False), ("figures", False), ("notebooks", True)):
        n, differ = compare(folder / part, reference / part, notebooks=notebooks)
        print(f"{part}/: {n - len(differ)} of {n} files equal to the reference")
        for line in differ:
            print(f"  {line}")
        failed |= bool(differ)
    print(f"scratch folder: {folder}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
