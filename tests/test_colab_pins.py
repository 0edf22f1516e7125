"""Colab's package set as `make colab` pins it (tests/colab/requirements.txt), how it
is refreshed from Colab's `pip freeze` (scripts/colab_pins.py), and how the stage finds
Colab's Python. The stage itself is tests/test_colab_like.py."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from colab_pins import PINS, find_python, read_freeze, refresh  # noqa: E402

# Lines as googlecolab/backend-info's pip-freeze.txt writes them
FREEZE = """\
# Do not modify this file directly
google-colab @ file:///colabtools/dist/google_colab-1.0.0.tar.gz
ipywidgets==7.7.1
jupyter_kernel_gateway @ git+https://github.com/googlecolab/kernel_gateway@b134e99
numpy==2.1.3
torch @ https://download.pytorch.org/whl/cpu/torch-2.11.0%2Bcpu-cp313-cp313-manylinux_2_28_x86_64.whl
torchvision==0.26.0+cu128
"""


def test_a_freeze_is_read_without_local_tags_or_unversioned_lines():
    assert read_freeze(FREEZE) == {
        "ipywidgets": "7.7.1",
        "numpy": "2.1.3",
        "torch": "2.11.0",
        "torchvision": "0.26.0",
    }


def test_refresh_rewrites_versions_keeps_comments_and_names_what_colab_dropped():
    pins = "# a comment\nnumpy==2.0.0\ntyping_extensions==4.0\nIPyWidgets==8.0.0\n"
    text, missing = refresh(pins, FREEZE)
    assert (
        text == "# a comment\nnumpy==2.1.3\ntyping_extensions==4.0\nIPyWidgets==7.7.1\n"
    )
    assert missing == ["typing_extensions"]


def test_the_pins_are_colabs_of_august_2026():
    text = PINS.read_text()
    assert "googlecolab/backend-info" in text and "2026-08-19" in text
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert all(read_freeze(line) for line in lines), "every line is name==version"
    assert "+" not in "".join(lines), "local version tags (+cpu, +cu128) are stripped"
    pins = read_freeze(text)
    assert len(pins) == len(lines), "no package twice"
    assert {
        name: pins[name]
        for name in ("torch", "numpy", "matplotlib", "ipywidgets", "ipykernel")
    } == {
        "torch": "2.11.0",
        "numpy": "2.1.3",
        "matplotlib": "3.10.0",
        "ipywidgets": "7.7.1",
        "ipykernel": "6.17.1",
    }
    assert (pins["ipython"], pins["tokenizers"], pins["scikit-learn"]) == (
        "7.34.0",
        "0.22.2",
        "1.6.1",
    )


def fake_python(folder: Path, version: str) -> Path:
    """An executable that answers the version question as that Python would."""
    path = folder / f"python{version[:4]}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho {version[:4]}\n")
    path.chmod(0o755)
    return path


def test_colabs_python_is_found_under_pyenv_newest_release_first(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("HOME", str(tmp_path))
    versions = tmp_path / "pyenv" / "versions"
    fake_python(versions / "3.13.1t" / "bin", "3.13")  # free-threaded: not Colab's
    assert find_python("3.13") is None
    fake_python(versions / "3.13.2" / "bin", "3.13")
    newest = fake_python(versions / "3.13.10" / "bin", "3.13")
    assert find_python("3.13") == newest


def test_a_python_on_path_that_answers_another_version_is_passed_over(
    tmp_path, monkeypatch
):
    shim = tmp_path / "shims" / "python3.13"  # pyenv's shim, 3.13 not selected
    shim.parent.mkdir()
    shim.write_text(
        "#!/bin/sh\necho 'pyenv: python3.13: command not found' >&2\nexit 127\n"
    )
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", str(shim.parent))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "none"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert find_python("3.13") is None
    real = fake_python(tmp_path / "none" / "versions" / "3.13.0" / "bin", "3.13")
    assert find_python("3.13") == real
