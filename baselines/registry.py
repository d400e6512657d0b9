"""Named scheduling policies: ``<order>+<allocation>``, e.g. ``fifo+tune``.

Orderings: ``fifo``, ``srtf``, ``las``. Allocation mechanisms: ``fair``
(GPU-proportional), ``greedy`` (Synergy-Greedy), ``tune`` (Synergy-Tune). Both
come from the simulator core; this registry only names their combinations.
"""

from __future__ import annotations

from synergy_gym.allocation import MECHANISMS
from synergy_gym.errors import UnknownNameError
from synergy_gym.ordering import ORDERINGS
from synergy_gym.policy import SchedulingPolicy


def policy_names() -> tuple[str, ...]:
    """Every valid policy name."""
    return tuple(f"{order}+{mech}" for order in ORDERINGS for mech in MECHANISMS)


def make_policy(name: str) -> SchedulingPolicy:
    """The policy called ``name``; an unknown name lists the valid ones."""
    order, sep, mech = name.strip().lower().partition("+")
    if not sep or order not in ORDERINGS or mech not in MECHANISMS:
        raise UnknownNameError("policy", name, policy_names())
    return SchedulingPolicy(ORDERINGS[order](), MECHANISMS[mech]())


def parse_policy_list(text: str) -> tuple[str, ...]:
    """``"fifo+fair, fifo+tune"`` → validated, de-duplicated names in order."""
    names: list[str] = []
    for raw in text.split(","):
        name = raw.strip().lower()
        if not name:
            continue
        make_policy(name)
        if name not in names:
            names.append(name)
    if not names:
        raise UnknownNameError("policy", text, policy_names())
    return tuple(names)
