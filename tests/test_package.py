import subprocess
import sys

import ragcal


def test_import_has_no_heavy_side_effects():
    code = (
        "import sys, ragcal; "
        "print(','.join(m for m in ('matplotlib', 'torch', 'sentence_transformers') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == ""


def test_public_api_is_curated_and_importable():
    assert len(ragcal.__all__) == len(set(ragcal.__all__))
    for name in ragcal.__all__:
        assert hasattr(ragcal, name), name
