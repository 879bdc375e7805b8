"""`pip install .` ships every app: the wheel holds each local app of INSTALLED_APPS and the
engine (the container image runs from the source tree, so nothing else would notice)."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


def _local_apps() -> set[str]:
    return {app.split(".")[0] for app in settings.INSTALLED_APPS if (ROOT / app).is_dir()}


def _copy_of_the_checkout(destination: Path) -> Path:
    """The tracked files, as they are in the working tree: setuptools builds inside the source
    folder, and a build/ folder there would be read by the tests that scan the tree."""
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, destination / name)
    return destination


def test_the_wheel_holds_every_app_package_and_the_engine(tmp_path):
    source = _copy_of_the_checkout(tmp_path / "source")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation",
         "--quiet", "--wheel-dir", str(tmp_path)],
        cwd=source, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = tmp_path.glob("fleetwise-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    packages = {name.split("/")[0] for name in names if name.endswith("/__init__.py")}
    expected = _local_apps() | {"config", "engine"}
    assert {"alerts", "telemetry", "engine"} <= expected
    assert expected <= packages, sorted(expected - packages)
    assert "tests" not in packages and "platform" not in packages
    # Migrations, templates, static files and the card catalog travel too.
    tracked = subprocess.run(
        ["git", "ls-files", *sorted(expected)], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    data_files = {path for path in tracked if not path.endswith(".py")}
    assert data_files and data_files <= set(names), sorted(data_files - set(names))
