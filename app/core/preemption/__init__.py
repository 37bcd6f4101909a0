"""Preemption: which running pods make room for a pending one, chosen node by node.

Quota first, as Kueue does (seed 000 经典抢占 / 公平共享), then room node by node (YuniKorn's victim
groups, seed 002). One module per rule family:

- candidates: who may be preempted (withinClusterQueue, reclaimWithinCohort, a running gang as one)
- ordering: Kueue's candidate order and the order of victim groups
- laws: YuniKorn's laws (guaranteeProtection, own gang, preemption fence, allow-preemption) and
  whether a pod may preempt at all (preemption.mode, preemptionPolicy, the preemption delay)
- classic: borrowWithinCohort, maxPriorityThreshold, candidateIsValid and classicalPreemptions' runs
- fairsharing: FindFairPreemptionTargets and its preemptionStrategies
- quota: which of the two frees the quota; removals: virtual removal from the quota tree
- nodes: each node's victim group; choose: the best one for a preemptor
- gang: the ACK seed's gang preemption; oracle: the flavor assigner's PreemptionOracle
- budgets: PodDisruptionBudgets (a spent one makes a last resort)
"""
from .spent_budgets import spent_budgets
from .choose import plans
from .gang import gang_plan
from .laws import delay_left, may_preempt
from .targets import Plan, Target, victim_message

__all__ = ["spent_budgets", "plans", "gang_plan", "delay_left", "may_preempt", "Plan", "Target", "victim_message"]
