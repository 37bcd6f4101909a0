"""The scheduler: the four verbs, the reconcile and the background loops, over one ClusterState.

Each verb takes a request value (request.py, decoded by api/), asks core/ for decisions, has commit.py apply
them to the state and hand the writes to act/, and returns one Outcome (outcome.py), journaled and booked once
at its end; api/ encodes it. Nothing here reads or writes wire bytes.
"""
