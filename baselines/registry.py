"""Named scheduling policies: ``<order>+<allocation>``, e.g. ``fifo+tune``.

Orderings: ``fifo``, ``srtf``, ``las`` (from the simulator core) and ``drf``,
``tetris``, ``ftf``, ``ftf_ref`` (:mod:`synergy_gym.baselines.orderings`). Allocation
mechanisms: ``fair`` (GPU-proportional), ``greedy`` (Synergy-Greedy), ``tune``
(Synergy-Tune) from the core, and ``opt`` / ``opt_lp`` (Synergy-OPT, its
integer program and LP relaxation, :mod:`synergy_gym.baselines.opt`). The paper's "DRF"
and "Tetris" baselines are ``drf+greedy`` and ``tetris+greedy``.
"""

from __future__ import annotations

from collections.abc import Callable

from synergy_gym.baselines.orderings import EXTRA_ORDERINGS
from synergy_gym.cli.args import list_items
from synergy_gym.errors import UnknownNameError
from synergy_gym.sim.allocation import MECHANISMS, AllocationMechanism
from synergy_gym.sim.ordering import ORDERINGS, Ordering
from synergy_gym.sim.policy import SchedulingPolicy

#: The policies ``synergy-gym compare`` runs without ``--policies``.
DEFAULT_POLICIES: tuple[str, ...] = ("fifo+fair", "fifo+greedy", "fifo+tune")


def _opt(relax: bool) -> Callable[[], AllocationMechanism]:
    def make() -> AllocationMechanism:
        from synergy_gym.baselines.opt import SynergyOpt  # scipy is only needed for OPT

        return SynergyOpt(relax=relax)

    return make


_ORDERINGS: dict[str, Callable[[], Ordering]] = {**ORDERINGS, **EXTRA_ORDERINGS}
_MECHANISMS: dict[str, Callable[[], AllocationMechanism]] = {**MECHANISMS, "opt": _opt(False), "opt_lp": _opt(True)}


def policy_names() -> tuple[str, ...]:
    """Every valid policy name."""
    return tuple(f"{order}+{mech}" for order in _ORDERINGS for mech in _MECHANISMS)


def make_policy(name: str) -> SchedulingPolicy:
    """The policy called ``name``; an unknown name, or one that is not a string, lists the valid ones."""
    if not isinstance(name, str):
        raise UnknownNameError("policy", name, policy_names())  # (a name's repr: None, 5, b'fifo+fair')
    order, sep, mech = name.strip().lower().partition("+")
    if not sep or order not in _ORDERINGS or mech not in _MECHANISMS:
        raise UnknownNameError("policy", name, policy_names())
    return SchedulingPolicy(_ORDERINGS[order](), _MECHANISMS[mech]())


def parse_policy_list(text: str, flag: str = "policy list") -> tuple[str, ...]:
    """``"fifo+fair, fifo+tune"`` → validated, de-duplicated names in order; an empty item is an error naming
    ``flag`` (the command-line option that gave ``text``)."""
    names: list[str] = []
    for name in (item.lower() for item in list_items(text, flag)):
        make_policy(name)
        if name not in names:
            names.append(name)
    return tuple(names)
