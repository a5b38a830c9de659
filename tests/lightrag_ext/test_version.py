"""Version guard: a LightRAG whose hooks moved is refused with the supported version named."""

from __future__ import annotations

import pytest

from lightrag_ext import version


def test_installed_lightrag_is_supported():
    version.check_lightrag_compat()


def test_changed_signature_is_refused(monkeypatch):
    import lightrag

    async def moved(self, chunks, status=None):  # a future LightRAG renamed the parameters
        return []

    monkeypatch.setattr(lightrag.LightRAG, "_process_extract_entities", moved)
    with pytest.raises(version.UnsupportedLightRAGVersion) as info:
        version.check_lightrag_compat()
    message = str(info.value)
    assert "lightrag-hku==1.5.7" in message and "_process_extract_entities" in message


def test_missing_hook_is_refused(monkeypatch):
    from lightrag import operate

    monkeypatch.delattr(operate, "_get_cached_extraction_results")
    with pytest.raises(version.UnsupportedLightRAGVersion, match="is missing"):
        version.check_lightrag_compat()


# A LightRAG release whose hook changed shape, set up before our entry point imports anything.
_WRONG_LIGHTRAG = """
import sys
import lightrag
lightrag.__version__ = "1.6.0"
async def moved(self, chunks, status=None):
    return []
lightrag.LightRAG._process_extract_entities = moved
from lightrag_ext import commands
sys.argv = [sys.argv[0]]
sys.exit(commands.{entry}())
"""


@pytest.mark.lightrag  # the console scripts run in a subprocess importing LightRAG
@pytest.mark.parametrize("entry", ["server", "gunicorn", "backfill"])
def test_console_scripts_refuse_a_wrong_lightrag_in_one_line(entry: str, tmp_path):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _WRONG_LIGHTRAG.format(entry=entry)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    [line] = [text for text in done.stderr.splitlines() if text.strip()]
    assert line.startswith(f"e2rag-lightrag-{entry}: error: ")
    assert "lightrag-hku==1.5.7" in line and "_process_extract_entities" in line
    assert done.stdout == ""
