"""app.objects.selectors: label selectors, node affinity terms and taint toleration."""
import pytest

from app.objects.selectors import decode_selector, node_affinity_matches, tolerates, untolerated_taint

# --- decode_selector ------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [{}, None, {"matchLabels": {}, "matchExpressions": []}])
def test_empty_selector_matches_everything(raw):
    sel = decode_selector(raw)
    assert sel.matches({}) is True
    assert sel.matches({"team": "a", "env": "prod"}) is True
    assert sel.describe() == "{} (everything)"


def test_match_labels_requires_every_pair():
    sel = decode_selector({"matchLabels": {"team": "a", "env": "prod"}})
    assert sel.matches({"team": "a", "env": "prod", "extra": "x"}) is True
    assert sel.matches({"team": "a"}) is False
    assert sel.matches({"team": "b", "env": "prod"}) is False


def test_match_expression_in():
    sel = decode_selector({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]})
    assert sel.matches({"team": "a"}) is True
    assert sel.matches({"team": "b"}) is True
    assert sel.matches({"team": "c"}) is False
    assert sel.matches({}) is False


def test_match_expression_not_in_matches_when_the_key_is_absent():
    sel = decode_selector({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]})
    assert sel.matches({"team": "b"}) is True
    assert sel.matches({}) is True
    assert sel.matches({"team": "a"}) is False


def test_match_expression_exists_and_does_not_exist():
    exists = decode_selector({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]})
    absent = decode_selector({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]})
    assert exists.matches({"gpu": ""}) is True
    assert exists.matches({"cpu": "x"}) is False
    assert absent.matches({"cpu": "x"}) is True
    assert absent.matches({"gpu": "a100"}) is False


def test_match_labels_and_expressions_are_anded():
    sel = decode_selector({"matchLabels": {"env": "prod"},
                           "matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]})
    assert sel.matches({"env": "prod", "team": "a"}) is True
    assert sel.matches({"env": "prod", "team": "b"}) is False
    assert sel.matches({"env": "dev", "team": "a"}) is False


def test_describe_lists_labels_and_expressions():
    sel = decode_selector({"matchLabels": {"env": "prod"},
                           "matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]},
                                                {"key": "gpu", "operator": "Exists"}]})
    assert sel.describe() == "env=prod, team In ['a'], gpu Exists"


@pytest.mark.parametrize("raw, message", [
    ({"matchExpressions": [{"key": "team", "operator": "Equals", "values": ["a"]}]}, "operator 'Equals'"),
    ({"matchExpressions": [{"key": "n", "operator": "Gt", "values": ["1"]}]}, "operator 'Gt'"),
    ({"matchExpressions": [{"key": "team", "operator": "In"}]}, "operator In needs values"),
    ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": []}]}, "operator NotIn needs values"),
    ({"matchExpressions": [{"key": "team", "operator": "Exists", "values": ["a"]}]}, "takes no values"),
    ({"matchExpressions": [{"operator": "Exists"}]}, "key is required"),
    ({"matchExpressions": [{"key": "team", "operator": "In", "values": [1]}]}, "list of strings"),
    ({"matchExpressions": ["team=a"]}, "must be objects"),
    ({"matchExpressions": {"key": "team"}}, "must be a list"),
    ({"matchLabels": {"team": 1}}, "matchLabels must map strings to strings"),
    ("team=a", "must be an object"),
])
def test_invalid_selector_raises_value_error_naming_the_problem(raw, message):
    with pytest.raises(ValueError, match=message):
        decode_selector(raw)


# --- node_affinity_matches ------------------------------------------------------------------

def term(*exprs):
    return {"matchExpressions": [dict(zip(("key", "operator", "values"), e)) for e in exprs]}


def test_no_affinity_terms_match_every_node():
    assert node_affinity_matches([], {"zone": "a"}) is True


def test_affinity_terms_are_ored():
    terms = [term(("zone", "In", ["a"])), term(("zone", "In", ["b"]))]
    assert node_affinity_matches(terms, {"zone": "a"}) is True
    assert node_affinity_matches(terms, {"zone": "b"}) is True
    assert node_affinity_matches(terms, {"zone": "c"}) is False


def test_expressions_within_a_term_are_anded():
    terms = [term(("zone", "In", ["a"]), ("gpu", "Exists", []))]
    assert node_affinity_matches(terms, {"zone": "a", "gpu": "t4"}) is True
    assert node_affinity_matches(terms, {"zone": "a"}) is False


def test_affinity_gt_and_lt_compare_integers():
    gt = [term(("cores", "Gt", ["8"]))]
    lt = [term(("cores", "Lt", ["8"]))]
    assert node_affinity_matches(gt, {"cores": "16"}) is True
    assert node_affinity_matches(gt, {"cores": "8"}) is False
    assert node_affinity_matches(lt, {"cores": "4"}) is True
    assert node_affinity_matches(lt, {"cores": "8"}) is False


def test_affinity_gt_fails_when_label_is_absent_or_not_an_integer():
    gt = [term(("cores", "Gt", ["8"]))]
    assert node_affinity_matches(gt, {}) is False
    assert node_affinity_matches(gt, {"cores": "many"}) is False


def test_affinity_not_in_and_does_not_exist():
    terms = [term(("zone", "NotIn", ["a"]), ("spot", "DoesNotExist", []))]
    assert node_affinity_matches(terms, {"zone": "b"}) is True
    assert node_affinity_matches(terms, {}) is True
    assert node_affinity_matches(terms, {"zone": "a"}) is False
    assert node_affinity_matches(terms, {"zone": "b", "spot": "true"}) is False


def test_empty_affinity_term_matches_no_node():
    assert node_affinity_matches([{}], {"zone": "a"}) is False
    assert node_affinity_matches([{"matchExpressions": []}], {"zone": "a"}) is False


def test_invalid_affinity_term_is_skipped_but_other_terms_still_match():
    terms = [term(("zone", "Bogus", ["a"])), term(("zone", "In", ["b"]))]
    assert node_affinity_matches(terms, {"zone": "a"}) is False
    assert node_affinity_matches(terms, {"zone": "b"}) is True


# --- tolerations ----------------------------------------------------------------------------

NO_SCHEDULE = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
NO_EXECUTE = {"key": "dedicated", "value": "batch", "effect": "NoExecute"}
PREFER = {"key": "spot", "value": "", "effect": "PreferNoSchedule"}


def test_exists_with_empty_key_tolerates_every_taint():
    tol = [{"operator": "Exists"}]
    assert tolerates(tol, NO_SCHEDULE) is True
    assert tolerates(tol, NO_EXECUTE) is True


def test_exists_with_empty_key_and_an_effect_tolerates_only_that_effect():
    tol = [{"operator": "Exists", "effect": "NoSchedule"}]
    assert tolerates(tol, NO_SCHEDULE) is True
    assert tolerates(tol, NO_EXECUTE) is False


def test_exists_with_key_tolerates_any_value_of_that_key():
    tol = [{"key": "gpu", "operator": "Exists"}]
    assert tolerates(tol, NO_SCHEDULE) is True
    assert tolerates(tol, {**NO_SCHEDULE, "value": "other"}) is True
    assert tolerates(tol, NO_EXECUTE) is False


def test_equal_requires_the_same_value():
    assert tolerates([{"key": "gpu", "operator": "Equal", "value": "true"}], NO_SCHEDULE) is True
    assert tolerates([{"key": "gpu", "operator": "Equal", "value": "false"}], NO_SCHEDULE) is False


def test_operator_defaults_to_equal():
    assert tolerates([{"key": "gpu", "value": "true"}], NO_SCHEDULE) is True
    assert tolerates([{"key": "gpu"}], NO_SCHEDULE) is False
    assert tolerates([{"key": "spot"}], PREFER) is True   # empty value equals empty value


def test_toleration_with_a_different_effect_does_not_tolerate():
    tol = [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoExecute"}]
    assert tolerates(tol, NO_SCHEDULE) is False


def test_no_tolerations_tolerate_nothing():
    assert tolerates([], NO_SCHEDULE) is False


def test_untolerated_taint_returns_the_first_uncovered_scheduling_taint():
    taints = [NO_SCHEDULE, NO_EXECUTE]
    assert untolerated_taint([], taints) == NO_SCHEDULE
    assert untolerated_taint([{"key": "gpu", "operator": "Exists"}], taints) == NO_EXECUTE
    assert untolerated_taint([{"operator": "Exists"}], taints) is None


def test_untolerated_taint_ignores_prefer_no_schedule():
    assert untolerated_taint([], [PREFER]) is None


def test_wire_pod_default_tolerations_do_not_cover_a_no_schedule_taint():
    """Wire README §2: pods arrive with the default not-ready/unreachable NoExecute tolerations."""
    default = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300},
               {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300}]
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
    assert untolerated_taint(default, [not_ready]) is None
    assert untolerated_taint(default, [not_ready, NO_SCHEDULE]) == NO_SCHEDULE
