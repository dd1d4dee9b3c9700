"""`offlint check --select ALL` over a real released tree, through the real CLI.

Marked `network`: the tree comes from the package registry via benchmarks/trees.py (cached under
$OFFLINT_CACHE_DIR); offline, the test skips with the reason. No timing is asserted here - the
numbers live in benchmarks/bench_check.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.network, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent


def _tree(name: str) -> Path:
    sys.path.insert(0, str(REPO))
    try:
        from benchmarks.trees import TreeUnavailable, get_tree
    finally:
        sys.path.remove(str(REPO))
    try:
        return get_tree(name)
    except TreeUnavailable as exc:
        pytest.skip(f"{name} release not available: {exc}")


@pytest.mark.parametrize("name", [os.environ.get("OFFLINT_REAL_TREE", "sglang")])
def test_check_all_rules_over_a_real_tree(name: str, tmp_path: Path) -> None:
    tree = _tree(name)
    done = subprocess.run(
        [sys.executable, "-m", "offlint", "check", "--select", "ALL", "--output-format", "offlint-json", "--no-cache", str(tree)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    assert "internal-error" not in done.stdout and "internal-error" not in done.stderr, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    document = json.loads(done.stdout)
    assert document["errors"] == []  # every file decoded, parsed and analysed
    if name == "sglang":
        # the hazards the merged upstream fix left in SGLang's own offloader
        found = {
            (d["code"], Path(d["filename"]).as_posix().split("sglang/srt/", 1)[-1])
            for d in document["diagnostics"]
        }
        assert ("OFL201", "utils/offloader.py") in found
        assert ("OFL203", "utils/offloader.py") in found
