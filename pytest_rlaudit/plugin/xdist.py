"""pytest-xdist: which process this is, and the controller's crash hook.

Results need no xdist hook: they ride on the test reports as JSON strings.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["XdistHooks", "is_worker"]


def is_worker(config: pytest.Config) -> bool:
    """Whether this process is an xdist worker (the controller alone reports and writes)."""
    return hasattr(config, "workerinput")


class XdistHooks:
    """Hooks of pytest-xdist's controller, registered only when xdist is loaded.

    Results need no xdist hook: they ride on the test reports. This one handles a worker
    that dies mid-audit (an agent calling os._exit, a segfault in native code): xdist
    reports the item it was running as crashed; for an audit item the report becomes an
    error that names the lost scenario, and the rl audit section lists it. The other
    items are rescheduled by xdist and reported as usual.
    """

    def __init__(self, session: Any) -> None:
        self.session = session

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        # a worker gets the controller's test paths as its own arguments: tell it that the
        # user gave none (switch.agent_only)
        node.workerinput["rlaudit_agent_only"] = self.session.agent_only

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: Any, sched: Any) -> None:
        scenario = self.session.scenario_of(crashitem)
        if scenario is None:
            return
        report.rl_lost = scenario
        report.longrepr = (f"{report.longrepr}: the audit of scenario {scenario!r} was lost with "
                           "the worker (an agent or env that ended the process, such as "
                           "os._exit or a crash in native code); the other scenarios are "
                           "reported")
        self.session.lost.append({"nodeid": crashitem, "scenario": scenario})
