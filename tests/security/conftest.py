"""Fixtures for the security suite: the integration suite's stacks, reused.

tests/integration/conftest.py is loaded here under its own module name and
everything public in it (fixtures `stack`, `client`, `room`, the hooks that
parametrise over SERVERS and turn skips into failures, the host-view helpers)
is re-exported, so a module in this folder works exactly like an
integration module: SERVERS and ROOMBOX_CONFIG at module level, and
`from conftest import wait_until, ...` for the helpers.

(A plain `sys.path.insert(...); from conftest import *` does not work: pytest
has already registered *this* file as the module `conftest`, so the import
would find this half-loaded module instead of the integration one.)

The security suite's own helpers are in security_helpers.py, not here: when
both folders are collected in one run, `conftest` in a test module may be
either folder's conftest, and only what both export can be imported from it.
"""

import importlib.util
import sys
from pathlib import Path

_INTEGRATION = Path(__file__).resolve().parents[1] / "integration" / "conftest.py"
_spec = importlib.util.spec_from_file_location("roombox_integration_conftest", _INTEGRATION)
_shared = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _shared
_spec.loader.exec_module(_shared)
globals().update({k: v for k, v in vars(_shared).items() if not k.startswith("_")})
