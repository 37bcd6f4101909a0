"""Every seed rule is findable by its name (issue 13, point 1): a grep for a term of the seeds, Kueue's API or
its code lands on the core/ function that applies it, by its name or its docstring."""
from __future__ import annotations

import ast
import pathlib

import pytest

CORE = pathlib.Path(__file__).resolve().parent.parent / "app" / "core"

TERMS = ["borrowWithinCohort", "maxPriorityThreshold", "reclaimWithinCohort", "withinClusterQueue",
         "LowerOrNewerEqualPriority", "LessThanOrEqualToFinalShare", "LessThanInitialShare", "preemption fence",
         "whenCanBorrow", "whenCanPreempt", "backoffLimitCount", "blockAdmission", "recoveryTimeout",
         "requeuingStrategy", "guaranteeProtection", "allow-preemption", "preemption delay", "StrictFIFO",
         "BestEffortFIFO", "lendingLimit", "borrowingLimit", "candidateIsValid", "PodDisruptionBudget",
         "minMember", "pod-group-total-count", "HoldAndDrain", "FindFairPreemptionTargets",
         "classicalPreemptions", "CandidatesOrdering", "mayReclaimInHierarchy", "preemption.mode",
         "preemptionPolicy", "stopPolicy", "namespaceSelector", "flavorFungibility", "waitForPodsReady",
         "shouldTryNextFlavor", "classifyPreemptionVariant", "PreemptionOracle", "WorkloadPriorityClass"]


def functions() -> list[tuple[str, str, str]]:
    """(module, function or class name, docstring) for everything defined in core/."""
    out = []
    for path in sorted(CORE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                out.append((str(path.relative_to(CORE)), node.name, ast.get_docstring(node) or ""))
    return out


DEFINED = functions()


def squashed(text: str) -> str:
    return text.lower().replace("_", "").replace(" ", "").replace("-", "")


@pytest.mark.parametrize("term", TERMS)
def test_a_seed_term_lands_on_the_function_that_applies_it(term):
    found = [f"{module}:{name}" for module, name, doc in DEFINED
             if term.lower() in doc.lower() or squashed(term) in squashed(name)]
    assert found, f"no core/ function names or documents {term}"
