"""Colab's package set as `make colab` pins it (tests/colab/requirements.txt), how it
is refreshed from Colab's `pip freeze` (scripts/colab_pins.py), and how the stage finds
Colab's Python. The stage itself is tests/test_colab_like.py."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import pytest  # noqa: E402
import yaml  # noqa: E402
from colab_pins import (  # noqa: E402
    PINS,
    changes,
    find_python,
    main,
    read_freeze,
    refresh,
    source,
)

SAMPLE = ROOT / "tests" / "colab" / "sample-pip-freeze.txt"
WATCH = ROOT / ".github" / "workflows" / "colab-watch.yml"

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


def test_a_saved_freeze_moves_drops_adds_and_strips_tags():
    """The sample moves numpy and matplotlib, drops scikit-learn, lists a package
    the pins lack (rich), and tags torch +cpu and torchvision +cu128."""
    pins = PINS.read_text()
    text, missing = refresh(
        pins,
        SAMPLE.read_text(),
        installed=["rich", "Fire"],
        commit="0123456789abcdef0",
        date="2026-12-01",
    )
    new, old = read_freeze(text), read_freeze(pins)
    assert (new["numpy"], new["matplotlib"], new["torch"]) == (
        "2.2.6",
        "3.10.3",
        "2.12.0",
    )
    assert "scikit-learn" in missing and new["scikit-learn"] == old["scikit-learn"]
    assert new["rich"] == "14.1.0", "pulled in and on Colab's list: added"
    assert "fire" not in new, "pulled in but not on Colab's list: left to pip"
    assert "torchvision" not in new, "on Colab's list but not pulled in: not added"
    assert "+" not in "".join(line for line in text.splitlines() if "==" in line)
    assert source(text) == ("0123456789ab", "2026-12-01")
    assert text.count("\n") == pins.count("\n") + 2  # the added line and its comment
    summary = changes(pins, text)
    assert "a72407924822 of 2026-08-19 → 0123456789ab of 2026-12-01" in summary
    assert "| numpy | 2.1.3 | 2.2.6 |" in summary
    assert "| rich |  | 14.1.0 |" in summary
    assert "ipywidgets" not in summary, "unchanged pins are not listed"
    assert changes(pins, pins).endswith("No pin changed.\n")


def test_refresh_refuses_a_bad_commit_or_date_and_pins_without_a_source():
    pins, freeze = PINS.read_text(), SAMPLE.read_text()
    for commit, date in [
        ("xyz", "2026-12-01"),
        ("0123abc", "1 Dec"),
        ("0123abc", None),
    ]:
        with pytest.raises(ValueError, match="commit|date"):
            refresh(pins, freeze, commit=commit, date=date)
    with pytest.raises(ValueError, match="Source"):
        refresh("numpy==1\n", freeze, commit="0123abc", date="2026-12-01")


def test_the_command_rewrites_the_pins_and_writes_the_summary(tmp_path, monkeypatch):
    pins = tmp_path / "requirements.txt"
    pins.write_text(PINS.read_text())
    monkeypatch.setattr("colab_pins.PINS", pins)
    monkeypatch.setattr("colab_pins.ROOT", tmp_path)
    summary = tmp_path / "changes.md"
    args = [str(SAMPLE), "--commit", "abcdef1", "--date", "2026-12-01"]
    assert main([*args, "--summary", str(summary)]) == 0
    assert read_freeze(pins.read_text())["numpy"] == "2.2.6"
    assert "No longer on Colab's list: scikit-learn" in summary.read_text()
    with pytest.raises(SystemExit):
        main([str(SAMPLE), "--commit", "abcdef1"])  # a commit without its date


def test_the_weekly_watch_fetches_refreshes_runs_and_reports():
    workflow = yaml.safe_load(WATCH.read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert triggers["schedule"][0]["cron"].split()[2:] == ["*", "*", "1"], "weekly"
    assert "workflow_dispatch" in triggers
    steps = workflow["jobs"]["watch"]["steps"]
    runs = "\n".join(step.get("run", "") for step in steps)
    assert "googlecolab/backend-info/main/pip-freeze.txt" in runs
    assert "scripts/colab_pins.py" in runs and "--summary" in runs
    assert "make colab" in runs and "COLAB_ENV_FREEZE" in str(steps)
    colab = next(step for step in steps if "make colab" in step.get("run", ""))
    assert colab["continue-on-error"] is True
    pull = next(s for s in steps if "create-pull-request" in s.get("uses", ""))
    assert "success" in pull["if"] and pull["with"]["add-paths"] == (
        "tests/colab/requirements.txt"
    )
    issue = next(s for s in steps if "gh issue create" in s.get("run", ""))
    assert "failure" in issue["if"] and "changes.md" in issue["run"]
    assert steps[-1]["if"] == "steps.colab.outcome == 'failure'"
    assert steps[-1]["run"] == "exit 1", "a broken chapter fails the job"


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


def test_the_stage_tries_pip_again_after_a_cut_download(tmp_path, monkeypatch):
    import test_colab_like

    monkeypatch.setattr(test_colab_like, "PIP_WAITS_S", (0, 0))
    monkeypatch.setattr(test_colab_like.time, "sleep", lambda s: None)
    tries = tmp_path / "tries"
    # fails twice with pip's status for an unexpected error (a time-out), then works
    flaky = (
        "import pathlib, sys; p = pathlib.Path(sys.argv[1]); "
        "n = int(p.read_text()) + 1 if p.exists() else 1; p.write_text(str(n)); "
        "sys.exit(0 if n == 3 else 2)"
    )
    test_colab_like.pip_install([sys.executable, "-c", flaky, str(tries)])
    assert tries.read_text() == "3"

    tries.unlink()
    broken = (
        "import pathlib, sys; p = pathlib.Path(sys.argv[1]); "
        "n = int(p.read_text()) + 1 if p.exists() else 1; p.write_text(str(n)); "
        "print('ReadTimeoutError: the read timed out'); sys.exit(2)"
    )
    with pytest.raises(pytest.fail.Exception, match="3 times.*\n.*ReadTimeoutError"):
        test_colab_like.pip_install([sys.executable, "-c", broken, str(tries)])
    assert tries.read_text() == "3"
