"""Every rule name Quotient decides by, written once: what refuses a pod, evicts one, clears a refusal or answers
it as a retry, and the outcomes the journal records, metrics count and /debug and the view show.

A rule name is what an admin greps for (the journal, quotient_* labels, a pod's /debug page, the reason's first
word), so each is spelled here and nowhere else; Kueue's own reasons keep Kueue's spelling. Kueue API enum values
(LowerPriority, StrictFIFO as a queueingStrategy, HoldAndDrain, ...), object kinds and wire field names are not
rules and stay with their decoders (objects/). The refusals decided while an object is decoded (objects/coverage:
TopologyNotSupported, DRANotSupported, KueueFeatureNotSupported, AdmissionGated) stay there too: objects/ sits
below core/.
"""
from __future__ import annotations

# --- Refusals (Verdict.rule, Refuse.rule, filter's journal outcome): why a pod may not pass now -------------------
NO_QUEUE_NAME = "NoQueueName"                        # no queue-name label: refused if manageJobsWithoutQueueName
WORKLOAD_PRIORITY_CLASS_NOT_FOUND = "WorkloadPriorityClassNotFound"   # its WorkloadPriorityClass does not exist
LOCAL_QUEUE_NOT_FOUND = "LocalQueueNotFound"         # its LocalQueue does not exist
LOCAL_QUEUE_STOPPED = "LocalQueueStopped"            # its LocalQueue is stopped (also an eviction reason: HoldAndDrain)
CLUSTER_QUEUE_NOT_FOUND = "ClusterQueueNotFound"     # its LocalQueue names no ClusterQueue that exists
CLUSTER_QUEUE_INACTIVE = "ClusterQueueInactive"      # its ClusterQueue is inactive (a missing flavor, a bad cohort)
CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"        # its ClusterQueue is stopped (also an eviction reason)
NAMESPACE_NOT_SELECTED = "NamespaceNotSelected"      # the ClusterQueue's namespaceSelector leaves its namespace out
JOB_NOT_SEEN = "JobNotSeen"                          # its Job is not known yet (waited for jobWaitTimeout)
INVALID_JOB = "InvalidJob"                           # its Job cannot be admitted as it is written
QUOTA_EXCEEDED = "QuotaExceeded"                     # no flavor has the quota, even borrowing
CLUSTER_QUEUE_OVER_QUOTA = "ClusterQueueOverQuota"   # its ClusterQueue went over quota outside Quotient (drift)
CHANGED_SINCE_FILTER = "ChangedSinceFilter"          # bind: the pod changed since filter admitted it (drift)
STRICT_FIFO = "StrictFIFO"                           # a StrictFIFO ClusterQueue's head that does not fit is ahead
STRICT_FIFO_RESERVATION = "StrictFIFOReservation"    # borrowing would take what a StrictFIFO head is kept
NOMINAL_QUOTA_FIRST = "NominalQuotaFirst"            # a pod that fits its nominal quota goes first
BORROWING_LEVEL_ORDER = "BorrowingLevelOrder"        # a pod that borrows less goes first (Kueue's ordering)
FAIR_SHARING_ORDER = "FairSharingOrder"              # a pod of a ClusterQueue with a lower share goes first
NO_FLAVOR_NODES = "NoFlavorNodes"                    # no offered node belongs to the flavors it was assigned
ROOM_HELD = "RoomHeld"                               # the room on the offered nodes is held for other pods
VICTIMS_STILL_RUNNING = "VictimsStillRunning"        # the quota is kept by pods being preempted for it
WAITING_FOR_VICTIMS = "WaitingForVictims"            # its own victims are leaving; its node is held for it
PREEMPTING = "Preempting"                            # victims chosen for it (also the journal's outcome)
PODS_READY_GATE = "PodsReadyGate"                    # waitForPodsReady: blockAdmission, a backoff or deactivated
ALREADY_ADMITTED = "AlreadyAdmitted"                 # a pod Quotient admitted and bound: only its own node, its flavors
POD_NOT_SEEN = "PodNotSeen"                          # a pod the API has not shown may not preempt
SOURCE_STALE = "SourceStale"                         # the watch is relisting: the state may be stale
GROUP_INCOMPLETE = "GroupIncomplete"                 # not all members of its pod group exist yet
PARTIALLY_ADMITTED = "PartiallyAdmitted"             # a group admitted with fewer pods (partial admission)
GROUP_PREEMPTING = "GroupPreempting"                 # victims are leaving for its pod group
GROUP_RESERVED = "GroupReserved"                     # its pod group is admitted; its node is reserved for it
GROUP_QUEUE_MISMATCH = "GroupQueueMismatch"          # the group's members name different queues
GROUP_SIZE_UNKNOWN = "GroupSizeUnknown"              # the group says no size
GROUP_UNPLACEABLE = "GroupUnplaceable"               # the group fits quota but not the nodes
TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"   # no domain of its topology level holds the group (Kueue's)
GROUP_ADMITTED = "GroupAdmitted"                     # its pod group was admitted whole (the journal's outcome)
JOB_AT_SIZE = "JobAtSize"                            # its Job runs all the pods it was admitted for
JOB_SLOT = "JobSlot"                                 # a pod of an admitted Job takes a slot its quota keeps
MAY_NOT_PREEMPT = "MayNotPreempt"                    # preemption.mode, preemptionPolicy Never, the preemption delay
NO_PREEMPTION = "NoPreemption"                       # no victim group frees quota and room

# --- The journal's other outcomes (metrics' outcome label, the log level, /debug) ---------------------------------
ADMITTED = "Admitted"                                # filter admitted the pod
BOUND = "Bound"                                      # bind wrote the binding
REFUSED = "Refused"                                  # bind refused the pod
QUOTA_INVARIANT = "QuotaInvariant"                   # bind: charging the pod would break the quota (a bug's guard)
WRITE_FAILED = "WriteFailed"                         # the API refused a write
OUTCOME_UNKNOWN = "OutcomeUnknown"                   # a write's answer was lost; a read settles it
EVICTED = "Evicted"                                  # a pod evicted (not for a preemptor)
PREEMPTED = "Preempted"                              # a pod evicted for a preemptor (Kueue's eviction reason)

# --- Eviction reasons (Evict.reason, quotient_evicted_workloads_total's reason) -----------------------------------
PODS_READY_TIMEOUT = "PodsReadyTimeout"              # waitForPodsReady: not all pods Ready in time
DEACTIVATED = "Deactivated"                          # waitForPodsReady: evicted for good (backoffLimitCount)
REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"  # the underlying cause of DEACTIVATED
IN_CLUSTER_QUEUE = "InClusterQueue"                  # preempted by a pod of its own ClusterQueue
IN_COHORT_RECLAMATION = "InCohortReclamation"        # preempted to give back quota its ClusterQueue borrowed
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"       # preempted for fair sharing in the cohort
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"   # reclaimed by a borrowing preemptor
LOWER_PRIORITY_ON_NODE = "LowerPriorityOnNode"       # a pod in no queue, taken only for room on the node
# The reasons that make an eviction a preemption (Kueue's preemption reasons); the others are not.
PREEMPTION_REASONS = frozenset({IN_CLUSTER_QUEUE, IN_COHORT_RECLAMATION, IN_COHORT_FAIR_SHARING,
                                IN_COHORT_RECLAIM_WHILE_BORROWING, LOWER_PRIORITY_ON_NODE})

# --- Why a refusal cleared (core.cleared, quotient_refusals_cleared_total, /debug/pods' clearedBecause) ----------
PODS_READY_GATE_CLEARED = "PodsReadyGateCleared"     # the workloads it waited for are Ready
WORKLOAD_PRIORITY_CLASS_CREATED = "WorkloadPriorityClassCreated"
JOB_SEEN = "JobSeen"                                 # its Job came
JOB_WAIT_OVER = "JobWaitOver"                        # jobWaitTimeout ran out
VICTIMS_GONE = "VictimsGone"                         # its victims left
HOLD_EXPIRED = "HoldExpired"                         # its hold expired
HOLD_RELEASED = "HoldReleased"                       # a hold that kept the room ended
GROUP_COMPLETE = "GroupComplete"                     # all members of its pod group exist
QUOTA_FREED = "QuotaFreed"                           # quota it lacked is free
QUEUE_CHANGED = "QueueChanged"                       # its queues changed so that it would pass
PREEMPTION_DELAY_OVER = "PreemptionDelayOver"        # it may preempt now
SEEN_AT_RETRY = "SeenAtRetry"                        # it passed at kube-scheduler's retry before the loop saw it clear

# --- Why a refusal is answered as a retry (refusals.retry_cause), not parked ---------------------------------------
PODS_READY_BACKOFF = "PodsReadyBackoff"              # its requeue backoff ends soon
BLOCK_ADMISSION = "BlockAdmission"                   # admitted pods turn Ready
VICTIMS_LEAVING = "VictimsLeaving"                   # victims are leaving
PREEMPTION_DELAY = "PreemptionDelay"                 # its preemption delay ends soon
QUEUE_HEAD = "QueueHead"                             # it heads its queue
QUOTA_IN_USE = "QuotaInUse"                          # quota frees as pods complete

# --- Why a ClusterQueue or LocalQueue is inactive (status conditions, /debug, the view) ---------------------------
FLAVOR_NOT_FOUND = "FlavorNotFound"                  # a ResourceFlavor it names does not exist
TOPOLOGY_NOT_FOUND = "TopologyNotFound"              # a flavor it names names a Topology that does not exist
COHORT_INVALID = "CohortInvalid"                     # its cohort tree is not valid (a cycle)
NOT_SUPPORTED_BY_QUOTIENT = "NotSupportedByQuotient" # it uses a field Quotient refuses (objects/coverage)
CLUSTER_QUEUE_DOES_NOT_EXIST = "ClusterQueueDoesNotExist"   # a LocalQueue's ClusterQueue does not exist
CLUSTER_QUEUE_IS_INACTIVE = "ClusterQueueIsInactive"        # a LocalQueue's ClusterQueue is inactive
