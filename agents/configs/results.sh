#!/usr/bin/env bash
# The README's "Results": the reference agents and their ablations against every baseline on the
# held-out workload seeds 1,000,000–1,000,019 (synergy-gym evaluate; paired per seed).
#
#   bash agents/configs/results.sh [RUNS] [OUT]
#
# RUNS (default runs/ref) holds the training runs, each trained with
#   synergy-gym train --config agents/configs/small_scarce.toml --seed S --out RUNS/ss-main-sS      (S = 0, 1, 2)
#   synergy-gym train --config agents/configs/small.toml --seed S --out RUNS/small-main-sS          (S = 0, 1, 2)
#   synergy-gym train --config agents/configs/small_scarce_preemptive.toml --seed S --out RUNS/ss-pre-sS  (S = 0, 1, 2)
#   synergy-gym train --resume RUNS/ss-main-s2/best_model.zip --config agents/configs/small_scarce_finetune.toml \
#       --out RUNS/ss-main-s2-lowlr                                  (the shipped pretrained:small-scarce)
# and the ablations (agents/configs/ablations.txt; their seeds are given there). OUT (default docs/results) gets one
# NAME.txt (the table) and NAME.json (its rows) per evaluation; the full outputs (per-seed CSV,
# JCT CDF) go to runs/results/NAME.
set -euo pipefail
RUNS=${1:-runs/ref}
OUT=${2:-docs/results}
SEEDS=1000000..1000019
mkdir -p "$OUT" runs/results

evaluate() {  # evaluate NAME ARGS...: one table
    local name=$1
    shift
    rm -rf "runs/results/$name"
    synergy-gym evaluate --seeds "$SEEDS" --quiet --device cpu --out "runs/results/$name" --json "$OUT/$name.json" "$@" \
        > "runs/results/$name.txt"
    cp "runs/results/$name.txt" "$OUT/$name.txt"
    cat "$OUT/$name.txt"
}

models() {  # models PREFIX [SEED...]: the training seeds' best checkpoints (default 0 1 2), labelled seedS
    local prefix=$1
    shift
    local seeds=("$@")
    [ ${#seeds[@]} -gt 0 ] || seeds=(0 1 2)
    for s in "${seeds[@]}"; do
        printf -- '--model %s/%s-s%s/best_model.zip --label seed%s ' "$RUNS" "$prefix" "$s" "$s"
    done
}

# Reference agents (3 training seeds) against every env heuristic, the simulator's policies and the bound.
evaluate small-scarce --env Synergy-small-scarce-v0 $(models ss-main) --baselines all
evaluate small --env Synergy-small-v0 $(models small-main) --baselines all

# The shipped small-scarce agent: seed 2's best checkpoint trained on at a lower learning rate
# (agents/configs/small_scarce_finetune.toml, into RUNS/ss-main-s2-lowlr), against that checkpoint, on the
# held-out seeds and on 20 seeds that neither training nor any other table used.
evaluate small-scarce-shipped --env Synergy-small-scarce-v0 --baselines env --sim-policies none \
    --model "$RUNS/ss-main-s2-lowlr/best_model.zip" --label fine-tuned --model "$RUNS/ss-main-s2/best_model.zip" --label seed2
SEEDS=5000000..5000019 evaluate small-scarce-shipped-unseen --env Synergy-small-scarce-v0 --baselines env \
    --sim-policies none --model "$RUNS/ss-main-s2-lowlr/best_model.zip" --label fine-tuned \
    --model "$RUNS/ss-main-s2/best_model.zip" --label seed2

# With preemption on the same workloads (issue 26: deciding only what changes): the env heuristics,
# four of the simulator's policies (no bounds: docs/ceilings has them) and the agents of
# agents/configs/small_scarce_preemptive.toml
# (training seeds 0, 1, 2); its ablations (agents/configs/ablations.txt): DAgger (seeds 0, 1), the
# DAgger recipe without slot_fits (seed 0), a lower PPO learning rate (seeds 0, 1, 2; seed 1
# continued to 300,000 steps), the hint recipes (seeds 0, 1, 2 each), and imitating tetris+greedy+readmit
# (seeds 0, 1; paired against that variant, which is named to run).
evaluate small-scarce-preemptive --env Synergy-small-scarce-v0 --env-kwargs preemptive=true \
    $(models ss-pre) --baselines all --sim-policies fifo+tune,srtf+tune,las+tune,tetris+greedy
evaluate ablation-preemptive --env Synergy-small-scarce-v0 --env-kwargs preemptive=true --baselines env \
    $(models ss-pre-dagger 0 1)
evaluate ablation-preemptive-no-fits --env Synergy-small-scarce-v0 --env-kwargs preemptive=true fit_features=false \
    --baselines env --model "$RUNS/ss-pre-abl-no-fits/best_model.zip" --label no-slot-fits
evaluate ablation-preemptive-low-lr --env Synergy-small-scarce-v0 --env-kwargs preemptive=true --baselines env \
    $(models ss-pre-lowlr)
evaluate ablation-preemptive-low-lr-300k --env Synergy-small-scarce-v0 --env-kwargs preemptive=true --baselines env \
    --model "$RUNS/ss-pre-lowlr-s1-300k/best_model.zip" --label seed1-300k
evaluate ablation-preemptive-hint --env Synergy-small-scarce-v0 --env-kwargs preemptive=true --baselines env \
    $(models ss-pre-hint)
evaluate ablation-preemptive-hint-lr --env Synergy-small-scarce-v0 --env-kwargs preemptive=true --baselines env \
    $(models ss-pre-hint-lr)
evaluate ablation-preemptive-hint-credit --env Synergy-small-scarce-v0 --env-kwargs preemptive=true --baselines env \
    $(models ss-pre-hint-credit)
evaluate ablation-preemptive-hint-gamma1 --env Synergy-small-scarce-v0 --env-kwargs preemptive=true --baselines env \
    $(models ss-pre-hint-g1)
evaluate ablation-preemptive-hint-mc --env Synergy-small-scarce-v0 --env-kwargs preemptive=true --baselines env \
    $(models ss-pre-hint-mc)
evaluate ablation-preemptive-readmit --env Synergy-small-scarce-v0 --env-kwargs preemptive=true \
    --baselines env,env:tetris+greedy+readmit $(models ss-pre-readmit 0 1)

# Zero-shot: the 128-GPU scenarios, and ±30 % load on the training scenario (at 0.7× load the 300
# jobs arrive over a longer time than the scenario's max_rounds allow, so it is doubled there).
evaluate zero-shot-scarce --env Synergy-scarce-v0 $(models ss-main) --baselines env --allow-env-mismatch
evaluate zero-shot-v0 --env Synergy-v0 $(models small-main) --baselines env --allow-env-mismatch
evaluate small-scarce-load-0.7 --env Synergy-small-scarce-v0 --env-kwargs jobs_per_hour=2.1 max_rounds=16000 $(models ss-main) --baselines env --allow-env-mismatch
evaluate small-scarce-load-1.3 --env Synergy-small-scarce-v0 --env-kwargs jobs_per_hour=3.9 $(models ss-main) --baselines env --allow-env-mismatch
evaluate small-load-0.7 --env Synergy-small-v0 --env-kwargs jobs_per_hour=1.575 max_rounds=8000 $(models small-main) --baselines env --allow-env-mismatch
evaluate small-load-1.3 --env Synergy-small-v0 --env-kwargs jobs_per_hour=2.925 $(models small-main) --baselines env --allow-env-mismatch

# Ablations (seed 0, Synergy-small-scarce-v0): each against the env heuristics in its own environment.
evaluate ablations --env Synergy-small-scarce-v0 --baselines env \
    --model "$RUNS/ss-main-s0/best_model.zip" --label main \
    --model "$RUNS/ss-abl-no-warm-start/best_model.zip" --label no-warm-start \
    --model "$RUNS/ss-abl-absolute-reward/best_model.zip" --label absolute-reward \
    --model "$RUNS/ss-abl-no-shared-workload/best_model.zip" --label no-shared-workload \
    --model "$RUNS/ss-abl-linear-head/best_model.zip" --label linear-head
evaluate ablation-levels-grid --env Synergy-small-scarce-v0 --env-kwargs levels=grid --baselines env \
    --model "$RUNS/ss-abl-levels-grid/best_model.zip" --label levels-grid
evaluate ablation-no-agent-orders --env Synergy-small-scarce-v0 --env-kwargs agent_orders=false --baselines env \
    --model "$RUNS/ss-abl-no-agent-orders/best_model.zip" --label no-agent-orders
evaluate ablation-gamma-0.999 --env Synergy-small-scarce-v0 $(models ss-abl-gamma-0.999) --baselines env
