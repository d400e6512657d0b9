"""The round-based cluster simulator: the core that every other layer drives.

Cluster and model profiles (:mod:`.cluster`, :mod:`.profiles`, :mod:`.profiling`), workloads and
their generator (:mod:`.workload`, :mod:`.generator`, :mod:`.model_mix`, :mod:`.philly_gpu_mix`),
per-job state (:mod:`.job_table`), the ledger of a round's grants and the allocation mechanisms
(:mod:`.allocation`), Tune's round planner (:mod:`.planner`), orderings and policies
(:mod:`.ordering`, :mod:`.policy`), the simulator itself (:mod:`.simulator`), its compiled
kernels (:mod:`.kernels`), what a run reports (:mod:`.metrics`), the no-waiting bound
(:mod:`.bounds`) and the contention-aware bound (:mod:`.contention_bound`, with its levels in
:mod:`.contention_levels` and its linear program in :mod:`.contention_lp`). Nothing here imports the
environment, the experiments or the CLI.
"""
