"""A workflow file or step module that calls ``sys.exit()`` while it is imported is a bad file:
exit 2 with one line naming it, not the process quietly exiting with the file's own code."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES

CASES = [
    ("py_exits.py", "{path}: importing the file failed: it called exit(5)"),
    ("step_module_exits.yaml", "{path}:4: steps.s.run: step 's': importing module 'exits_at_import' failed: "
                               "it called exit(5)"),
]


@pytest.mark.parametrize(("name", "message"), CASES, ids=[n for n, _ in CASES])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_exit_at_import_is_exit_2_naming_the_file(cli, db_url, name, message, command):
    path = FIXTURES / name
    result = cli(command, str(path), db=command == "run")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == ["error: " + message.format(path=path)]
    assert not Path(db_url.split("///", 1)[1]).exists()
