"""``make demo`` runs every plugin against the emulators and shows answers a newcomer can trust:
every plugin answers, every answer may be cached (no ``cacheDuration: 0s``, which reads as broken),
and no password is printed in the clear."""

from __future__ import annotations

import json
import subprocess
import sys

from emulators.aws import FakeEcr
from emulators.gcp import FakeMetadata
from release.bundle import REPO


def test_the_demo_answers_every_scenario_with_a_cacheable_redacted_response() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "demo"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stdout.rstrip().endswith("All plugins answered.")
    answers = [
        json.loads(line.removeprefix("stdout: "))
        for line in run.stdout.splitlines()
        if line.startswith("stdout: ")
    ]
    titles = [line for line in run.stdout.splitlines() if line.startswith("== ")]
    assert len(answers) == len(titles) >= 8
    for title, answer in zip(titles, answers, strict=True):
        assert answer["kind"] == "CredentialProviderResponse", title
        assert answer["cacheDuration"] not in ("0s", ""), title
        for entry in answer["auth"].values():
            assert "…(" in entry["password"], title  # redacted: "abc…(29 chars)"
    for secret in (FakeEcr.password, FakeMetadata.access_token):
        assert secret not in run.stdout + run.stderr
