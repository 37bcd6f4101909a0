"""deploy/ as `kubectl apply -k` sees it: every variant with every combination of the admin's components renders
(`kubectl kustomize`), every rendered object validates (kubernetes-validate, strict, for Kubernetes 1.30 and the
newest release it knows; cert-manager's and the Prometheus operator's kinds against the fields of their CRDs
that deploy/ uses), every KubeSchedulerConfiguration decodes strictly (tests/kube_scheduler_config.py), and
kube-scheduler's extender entry agrees with the Quotient the same variant deploys: scheme, Service, port, path
prefix, serverName, CA and client certificate, the certificate's CN mapped to role scheduler. Rendered with
another namespace, "quotient-system" is left nowhere.

TLS is either cert-manager's (the component) or deploy/certs.sh's: for the latter the script runs here with a
kubectl that records its calls, and the certificates it writes are read with openssl."""
from __future__ import annotations

import atexit
import base64
import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
from itertools import combinations
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

import kube_scheduler_config
from app.config import decode_configuration

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
KUBECTL = shutil.which("kubectl")
OPENSSL = shutil.which("openssl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="needs kubectl (its built-in kustomize renders deploy/); "
                                "the machine image has it, .ci/run installs it with apt-get where it is missing")

VARIANTS = ["second-scheduler", "main-scheduler"]
TLS_SOURCES = ["cert-manager", "certs-sh"]
OPTIONAL = ["kueue", "prometheus", "view-port"]
COMBINATIONS = [(v, tls, extra) for v in VARIANTS for tls in TLS_SOURCES
                for n in range(len(OPTIONAL) + 1) for extra in combinations(OPTIONAL, n)]
# Where deploy/README.md ("Main scheduler") tells the admin to copy the control plane scheduler's files.
MAIN_SCHEDULER_DIR = "/etc/kubernetes/quotient"
MAIN_SCHEDULER_FILES = {f"{MAIN_SCHEDULER_DIR}/{k}": ("quotient-scheduler-tls", k) for k in ("ca.crt", "tls.crt", "tls.key")}
LEADER_LABEL = ("quotient.dev/leader", "true")


# --- rendering ------------------------------------------------------------------------------------------------

@functools.cache
def _tree() -> Path:
    """A copy of deploy/ to write variants of the variants into (kustomize loads only files under a root)."""
    where = Path(tempfile.mkdtemp(prefix="quotient-deploy-"))
    atexit.register(shutil.rmtree, where, True)
    shutil.copytree(DEPLOY, where / "deploy", ignore=shutil.ignore_patterns("*.json", "__pycache__"))
    return where / "deploy"


def kustomize(directory: Path) -> str:
    done = subprocess.run([KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"kubectl kustomize {directory}:\n{done.stderr}"
    return done.stdout


@functools.cache
def render_text(variant: str, tls: str = "cert-manager", extra: tuple[str, ...] = (),
                namespace: str | None = None, image: tuple[str, str] | None = None) -> str:
    """The variant with exactly these components (TLS from cert-manager's component, or none for certs.sh),
    and optionally another namespace or image set in its kustomization, as an admin edits it."""
    tree = _tree()
    name = "-".join(["v", variant, tls, *extra, namespace or "", *(image or ())]).replace("/", "_").replace(":", "_")
    target = tree / name
    if not target.exists():
        shutil.copytree(tree / variant, target)
        k = yaml.safe_load((target / "kustomization.yaml").read_text())
        k["components"] = (["../components/cert-manager"] if tls == "cert-manager" else []) + \
            [f"../components/{c}" for c in extra]
        if namespace:
            k["namespace"] = namespace
        if image:
            k["images"] = [{"name": "quotient", "newName": image[0], "newTag": image[1]}]
        (target / "kustomization.yaml").write_text(yaml.safe_dump(k))
    return kustomize(target)


def render(*args, **kw) -> list[dict]:
    return [d for d in yaml.safe_load_all(render_text(*args, **kw)) if d]


def one(objs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''}"
    return found[0]


# --- schemas ----------------------------------------------------------------------------------------------------

def _validate_builtin(obj: dict, version: str) -> str | None:
    """kubernetes-validate strict; None when it has no schema for the kind (a CRD's kind)."""
    import kubernetes_validate

    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return None
    except kubernetes_validate.ValidationError as e:
        return f"{obj['kind']}/{obj['metadata']['name']} ({version}): {e.message} at {'.'.join(map(str, e.path))}"
    return ""


_S = {"type": "string"}
_SECRET_KEY = {"type": "object", "required": ["name", "key"], "properties": {"name": _S, "key": _S}}
_USAGES = ["signing", "digital signature", "content commitment", "key encipherment", "key agreement",
           "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any", "server auth",
           "client auth", "code signing", "email protection", "s/mime", "ipsec end system", "ipsec tunnel",
           "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc"]
_META = {"type": "object", "required": ["name", "namespace"], "x-kubernetes-preserve-unknown-fields": True}
# The fields of cert-manager.io/v1 and monitoring.coreos.com/v1 that deploy/ uses, typed as their CRDs type them
# (cert-manager's Certificate and Issuer, the Prometheus operator's PodMonitor and PrometheusRule); any other field
# is an error.
CRD_KINDS = {
    ("cert-manager.io/v1", "Issuer"): {"type": "object", "required": ["spec"], "properties": {
        "apiVersion": _S, "kind": _S, "metadata": _META,
        "spec": {"type": "object", "properties": {
            "selfSigned": {"type": "object", "properties": {}},
            "ca": {"type": "object", "required": ["secretName"], "properties": {"secretName": _S}}}}}},
    ("cert-manager.io/v1", "Certificate"): {"type": "object", "required": ["spec"], "properties": {
        "apiVersion": _S, "kind": _S, "metadata": _META,
        "spec": {"type": "object", "required": ["secretName", "issuerRef"], "properties": {
            "secretName": _S, "commonName": {"type": "string", "maxLength": 64}, "isCA": {"type": "boolean"},
            "dnsNames": {"type": "array", "items": _S}, "ipAddresses": {"type": "array", "items": _S},
            "duration": {"type": "string", "format": "duration"}, "renewBefore": {"type": "string", "format": "duration"},
            "usages": {"type": "array", "items": {"type": "string", "enum": _USAGES}},
            "privateKey": {"type": "object", "properties": {
                "algorithm": {"type": "string", "enum": ["RSA", "ECDSA", "Ed25519"]}, "size": {"type": "integer"}}},
            "issuerRef": {"type": "object", "required": ["name"], "properties": {
                "name": _S, "kind": _S, "group": _S}}}}}},
    ("monitoring.coreos.com/v1", "PodMonitor"): {"type": "object", "required": ["spec"], "properties": {
        "apiVersion": _S, "kind": _S, "metadata": _META,
        "spec": {"type": "object", "properties": {
            "selector": {"type": "object", "properties": {
                "matchLabels": {"type": "object", "additionalProperties": _S}}},
            "podMetricsEndpoints": {"type": "array", "items": {"type": "object", "properties": {
                "port": _S, "scheme": {"type": "string", "enum": ["http", "https", "HTTP", "HTTPS"]},
                "path": _S, "interval": {"type": "string", "format": "duration"},
                "tlsConfig": {"type": "object", "properties": {
                    "serverName": _S, "insecureSkipVerify": {"type": "boolean"},
                    "ca": {"type": "object", "properties": {"secret": _SECRET_KEY}},
                    "cert": {"type": "object", "properties": {"secret": _SECRET_KEY}},
                    "keySecret": _SECRET_KEY}}}}}}}}},
    ("monitoring.coreos.com/v1", "PrometheusRule"): {"type": "object", "required": ["spec"], "properties": {
        "apiVersion": _S, "kind": _S, "metadata": _META,
        "spec": {"type": "object", "properties": {
            "groups": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
                "name": _S, "interval": {"type": "string", "format": "duration"},
                "rules": {"type": "array", "items": {"type": "object", "required": ["expr"], "properties": {
                    "record": _S, "alert": _S, "expr": {"x-kubernetes-int-or-string": True},
                    "for": {"type": "string", "format": "duration"},
                    "labels": {"type": "object", "additionalProperties": _S},
                    "annotations": {"type": "object", "additionalProperties": _S}}}}}}}}}}},
}


def schema_problems(obj: dict) -> list[str]:
    """Every rendered object against its schema: built-in kinds by kubernetes-validate (1.30 and its newest),
    the CRD kinds above by their fields; a kind with neither is a problem."""
    import kubernetes_validate
    from test_manifests import validate

    out = []
    results = [_validate_builtin(obj, v) for v in ("1.30", kubernetes_validate.latest_version())]
    if any(results):
        out += [r for r in results if r]
    elif results[0] is None:
        schema = CRD_KINDS.get((obj["apiVersion"], obj["kind"]))
        if schema is None:
            out.append(f"{obj['apiVersion']} {obj['kind']}: no schema to validate against")
        else:
            out += [f"{obj['kind']}/{obj['metadata']['name']}{p}" for p in validate(obj, schema)]
    return out


# --- what each side holds ------------------------------------------------------------------------------------

def _args(container: dict) -> dict[str, str]:
    """--flag value and --flag=value pairs of a container's args/command."""
    words = list(container.get("command", [])) + list(container.get("args", []))
    out = {}
    for i, w in enumerate(words):
        if w.startswith("--"):
            if "=" in w:
                k, v = w.split("=", 1)
                out[k] = v
            else:
                out[w] = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else ""
    return out


def _mounted(pod: dict, container: dict, path: str) -> tuple[str, str] | None:
    """(Secret or ConfigMap name, key) a file path of the container reads, through its mounts."""
    for m in container.get("volumeMounts", []):
        if path.startswith(m["mountPath"].rstrip("/") + "/"):
            key = path[len(m["mountPath"].rstrip("/")) + 1:]
            volume = next(v for v in pod["volumes"] if v["name"] == m["name"])
            if "secret" in volume:
                return volume["secret"]["secretName"], key
            if "configMap" in volume:
                return volume["configMap"]["name"], key
    return None


class Certs:
    """The certificates in each Secret: secret -> {"cn", "sans", "issuer"}; "issuer" names the CA that signed the
    Secret's tls.crt, and "ca" the CA its ca.crt holds."""

    def __init__(self, by_secret: dict[str, dict], files: dict[tuple[str, str], Path] | None = None,
                 bundles: dict[str, str] | None = None):
        self.by_secret = by_secret
        self.files = files or {}        # (Secret, key) -> the file certs.sh wrote
        self.bundles = bundles or {}    # MutatingWebhookConfiguration -> the caBundle certs.sh patched in (PEM)

    @classmethod
    def from_cert_manager(cls, objs: list[dict]) -> "Certs":
        issuers = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Issuer"}
        certificates = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Certificate"}
        out = {}
        for c in certificates.values():
            spec = c["spec"]
            issuer = issuers[spec["issuerRef"]["name"]]["spec"]
            # A CA Issuer's certificates carry its CA's certificate as ca.crt; a self-signed one, their own.
            ca = f"secret:{issuer['ca']['secretName']}" if "ca" in issuer else f"secret:{spec['secretName']}"
            out[spec["secretName"]] = {"cn": spec.get("commonName"), "ca": ca, "issuer": ca,
                                       "sans": set(spec.get("dnsNames", [])) | set(spec.get("ipAddresses", []))}
        return cls(out)

    @classmethod
    def from_certs_sh(cls, namespace: str) -> "Certs":
        return _certs_sh(namespace)


@functools.cache
def _certs_sh(namespace: str) -> Certs:
    """deploy/certs.sh --namespace NS with a kubectl that records its calls: which file went into which Secret,
    and what openssl reads in those files."""
    assert OPENSSL, "needs openssl"
    work = Path(tempfile.mkdtemp(prefix="quotient-certs-"))
    atexit.register(shutil.rmtree, work, True)
    (work / "bin").mkdir()
    (work / "bin" / "kubectl").write_text(f"""#!/bin/sh
printf '%s\\n' "$*" >> {work}/calls
case "$*" in
  *" -o yaml") echo "kind: Secret" ;;
  "apply -f -") cat > /dev/null ;;
esac
""")
    (work / "bin" / "kubectl").chmod(0o755)
    done = subprocess.run(["bash", str(DEPLOY / "certs.sh"), "--namespace", namespace, "--dir", str(work / "pki"),
                           "--days", "2"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": f"{work / 'bin'}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    out, files, bundles = {}, {}, {}
    for call in (work / "calls").read_text().splitlines():
        gate = re.fullmatch(r"patch mutatingwebhookconfiguration (\S+) --type json -p (\S+)", call)
        if gate:
            (op,) = json.loads(gate.group(2))
            assert (op["op"], op["path"]) == ("add", "/webhooks/0/clientConfig/caBundle"), op
            bundles[gate.group(1)] = base64.b64decode(op["value"]).decode()
        m = re.match(rf"-n {re.escape(namespace)} create secret generic (\S+) --from-file=tls.crt=(\S+) "
                     r"--from-file=tls.key=\S+ --from-file=ca.crt=(\S+)", call)
        if m:
            secret, crt, ca = m.groups()
            files.update({(secret, "tls.crt"): work / "pki" / crt, (secret, "ca.crt"): work / "pki" / ca,
                          (secret, "tls.key"): work / "pki" / crt.replace(".crt", ".key")})
            text = subprocess.run([OPENSSL, "x509", "-in", str(work / "pki" / crt), "-noout", "-subject", "-issuer",
                                   "-ext", "subjectAltName", "-nameopt", "RFC2253"],
                                  capture_output=True, text=True, check=True).stdout
            subject = re.search(r"^subject=(.*)$", text, re.M).group(1)
            issuer = re.search(r"^issuer=(.*)$", text, re.M).group(1)
            ca_subject = subprocess.run([OPENSSL, "x509", "-in", str(work / "pki" / ca), "-noout", "-subject",
                                         "-nameopt", "RFC2253"], capture_output=True, text=True,
                                        check=True).stdout.split("=", 1)[1].strip()
            sans = set(re.findall(r"DNS:([^,\s]+)", text)) | set(re.findall(r"IP Address:([^,\s]+)", text))
            cn = re.search(r"CN=([^,]+)", subject)
            out[secret] = {"cn": cn.group(1) if cn else None, "sans": sans, "issuer": issuer, "ca": ca_subject}
    return Certs(out, files, bundles)


def quotient_side(objs: list[dict]) -> dict:
    """What the deployed Quotient demands: from its Deployment, Configuration, Services and Secrets."""
    deployment = one(objs, "Deployment", "quotient")
    pod = deployment["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    args = _args(c)
    config_ref = _mounted(pod, c, args["--config"])
    config = yaml.safe_load(one(objs, "ConfigMap", config_ref[0])["data"][config_ref[1]])
    return {"namespace": deployment["metadata"]["namespace"], "pod": pod, "container": c, "args": args,
            "labels": deployment["spec"]["template"]["metadata"]["labels"], "config": config,
            "port": int(args.get("--port", 8888)), "https": "--tls-cert" in args,
            "serving": _mounted(pod, c, args["--tls-cert"]) if "--tls-cert" in args else None,
            "serving_key": _mounted(pod, c, args["--tls-key"]) if "--tls-key" in args else None,
            "client_ca": _mounted(pod, c, args["--tls-client-ca"]) if "--tls-client-ca" in args else None}


def roles_of(config: dict, cn: str | None) -> set[str]:
    """The roles Quotient's clientIdentities give a certificate with this CN (no O in ours); the interfaces'
    default map when the Configuration has none."""
    identities = config.get("clientIdentities") or [
        {"role": r, "commonName": f"quotient-{r}"} for r in ("scheduler", "admin", "viewer", "metrics")]
    return {i["role"] for i in identities if i.get("commonName") == cn and not i.get("organization")}


def _service_port_reaches(service: dict, port: int, container: dict) -> bool:
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    for p in service["spec"]["ports"]:
        if p["port"] == port:
            target = p.get("targetPort", p["port"])
            return (named.get(target) if isinstance(target, str) else target)
    return False


def agreement(objs: list[dict], cfg: dict, scheduler_files: dict[str, tuple[str, str]], certs: Certs) -> list[str]:
    """Where kube-scheduler's extender entry and the Quotient the same variant deploys disagree (empty: none).
    scheduler_files maps each file tlsConfig names to the (Secret, key) it holds."""
    q = quotient_side(objs)
    out = []
    extenders = cfg.get("extenders") or []
    if len(extenders) != 1:
        return [f"{len(extenders)} extenders, expected Quotient alone"]
    (ext,) = extenders
    url = urlsplit(ext["urlPrefix"])
    scheme = "https" if q["https"] else "http"
    if url.scheme != scheme or bool(ext.get("enableHTTPS")) != q["https"]:
        out.append(f"kube-scheduler calls {url.scheme} (enableHTTPS {ext.get('enableHTTPS', False)}) but Quotient "
                   f"serves {scheme}")
    host = (url.hostname or "").split(".")
    service_name, namespace = host[0], host[1] if len(host) > 1 else q["namespace"]
    if namespace != q["namespace"] or host[2:] not in ([], ["svc"], ["svc", "cluster", "local"]):
        out.append(f"urlPrefix host {url.hostname} is not a Service of namespace {q['namespace']}")
    services = [o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == service_name]
    if not services:
        out.append(f"no Service {service_name} for urlPrefix {ext['urlPrefix']}")
    else:
        (svc,) = services
        selector = svc["spec"]["selector"]
        if not selector.items() <= {**q["labels"], LEADER_LABEL[0]: LEADER_LABEL[1]}.items():
            out.append(f"Service {service_name} selects {selector}, not Quotient's pods")
        if selector.get(LEADER_LABEL[0]) != LEADER_LABEL[1]:
            out.append(f"Service {service_name} does not select the leader label only")
        if _service_port_reaches(svc, url.port or (443 if url.scheme == "https" else 80), q["container"]) != q["port"]:
            out.append(f"urlPrefix port {url.port} does not reach Quotient's --port {q['port']}")
    if url.path.rstrip("/") != (q["config"].get("pathPrefix") or "").rstrip("/"):
        out.append(f"urlPrefix path {url.path!r} is not Quotient's pathPrefix {q['config'].get('pathPrefix')!r}")
    if not q["https"]:
        return out
    tls = ext.get("tlsConfig") or {}
    if tls.get("insecure"):
        out.append("tlsConfig.insecure: true")
    serving_secret = q["serving"][0]
    if q["serving"] != (serving_secret, "tls.crt") or q["serving_key"] != (serving_secret, "tls.key") \
            or q["client_ca"] != (serving_secret, "ca.crt"):
        out.append(f"Quotient's --tls-cert/--tls-key/--tls-client-ca are not tls.crt/tls.key/ca.crt of one Secret")
    serving = certs.by_secret.get(serving_secret)
    if serving is None:
        return out + [f"nothing makes Quotient's Secret {serving_secret}"]
    server_name = tls.get("serverName") or url.hostname
    if server_name not in serving["sans"]:
        out.append(f"serverName {server_name} is not a name of Quotient's certificate ({sorted(serving['sans'])})")
    files = {}
    for field, key in (("caFile", "ca.crt"), ("certFile", "tls.crt"), ("keyFile", "tls.key")):
        where = scheduler_files.get(tls.get(field))
        if where is None or where[1] != key:
            out.append(f"tlsConfig.{field} {tls.get(field)} is not the {key} of a Secret given to kube-scheduler")
        else:
            files[field] = where[0]
    if len(set(files.values())) > 1:
        out.append(f"tlsConfig's files come from different Secrets: {files}")
    client = certs.by_secret.get(files.get("certFile"))
    if client is None:
        return out + [f"nothing makes kube-scheduler's Secret {files.get('certFile')}"]
    if client["ca"] != serving["issuer"]:
        out.append("kube-scheduler's caFile is not the CA that signed Quotient's serving certificate")
    if client["issuer"] != serving["ca"]:
        out.append("Quotient's --tls-client-ca did not sign kube-scheduler's client certificate")
    if "scheduler" not in roles_of(q["config"], client["cn"]):
        out.append(f"kube-scheduler's certificate CN {client['cn']} has no role scheduler in clientIdentities")
    return out


def scheduler_config_of(objs: list[dict], variant: str) -> tuple[dict, dict[str, tuple[str, str]]]:
    """The variant's KubeSchedulerConfiguration and where kube-scheduler finds the files it names."""
    if variant == "second-scheduler":
        deployment = one(objs, "Deployment", "quotient-scheduler")
        pod = deployment["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        ref = _mounted(pod, c, _args(c)["--config"])
        text = one(objs, "ConfigMap", ref[0])["data"][ref[1]]
        cfg = kube_scheduler_config.load(text)
        files = {p: _mounted(pod, c, p) for p in
                 (cfg["extenders"][0].get("tlsConfig") or {}).values() if isinstance(p, str) and p.startswith("/")}
        return cfg, {p: w for p, w in files.items() if w}
    text = one(objs, "ConfigMap", "quotient-main-scheduler-config")["data"]["config.yaml"]
    return kube_scheduler_config.load(text), MAIN_SCHEDULER_FILES


def certs_for(objs: list[dict], tls: str, namespace: str) -> Certs:
    return Certs.from_cert_manager(objs) if tls == "cert-manager" else Certs.from_certs_sh(namespace)


# --- the tests ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variant_renders_as_shipped_with_cert_manager_and_quotients_crds(variant):
    objs = [d for d in yaml.safe_load_all(kustomize(DEPLOY / variant)) if d]
    kinds = {o["kind"] for o in objs}
    assert {"Namespace", "CustomResourceDefinition", "Deployment", "Service", "PodDisruptionBudget",
            "NetworkPolicy", "Certificate", "Issuer", "ConfigMap"} <= kinds
    assert one(objs, "Namespace")["metadata"]["name"] == "quotient-system"
    assert {o["metadata"].get("namespace") for o in objs if o["kind"] not in
            ("Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
             "MutatingWebhookConfiguration")} == {"quotient-system"}
    assert "PodMonitor" not in kinds
    (c,) = one(objs, "Deployment", "quotient")["spec"]["template"]["spec"]["containers"]
    assert not any(a.startswith("--view-port") for a in c["args"])


@pytest.mark.parametrize("variant, tls, extra", COMBINATIONS,
                         ids=lambda x: ("+".join(x) or "alone") if isinstance(x, tuple) else str(x))
def test_every_combination_renders_validates_and_both_sides_of_tls_agree(variant, tls, extra):
    objs = render(variant, tls, extra)
    kinds = [o["kind"] for o in objs]
    assert ("CustomResourceDefinition" in kinds) == ("kueue" not in extra)
    assert ("PodMonitor" in kinds) == ("PrometheusRule" in kinds) == ("prometheus" in extra)
    assert ("Certificate" in kinds) == (tls == "cert-manager")
    (c,) = one(objs, "Deployment", "quotient")["spec"]["template"]["spec"]["containers"]
    assert ("--view-port=8081" in c["args"]) == ("view-port" in extra)
    problems = [p for o in objs for p in schema_problems(o)]
    assert not problems, "\n".join(problems)
    cfg, files = scheduler_config_of(objs, variant)
    assert kube_scheduler_config.decode(cfg) == []
    assert agreement(objs, cfg, files, certs_for(objs, tls, "quotient-system")) == []
    assert not webhook_and_scrape_problems(objs, certs_for(objs, tls, "quotient-system"))


@pytest.mark.parametrize("variant, tls", [(v, t) for v in VARIANTS for t in TLS_SOURCES])
def test_another_namespace_and_image_are_the_kustomization_fields_alone(variant, tls):
    """Only `namespace:` and `images:` edited: no "quotient-system" is left anywhere (embedded configs, DNS
    names, serverName, the CA injection annotation, RBAC subjects, the conversion webhook), and both sides
    still agree in the new namespace (certs.sh run with --namespace)."""
    text = render_text(variant, tls, tuple(OPTIONAL[1:]), namespace="team-x",
                       image=("registry.example.com/quotient", "1.2.3"))
    assert "quotient-system" not in text, [l for l in text.splitlines() if "quotient-system" in l]
    objs = [d for d in yaml.safe_load_all(text) if d]
    (c,) = one(objs, "Deployment", "quotient")["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "registry.example.com/quotient:1.2.3"
    cfg, files = scheduler_config_of(objs, variant)
    assert urlsplit(cfg["extenders"][0]["urlPrefix"]).hostname == "quotient.team-x.svc"
    assert agreement(objs, cfg, files, certs_for(objs, tls, "team-x")) == []
    assert not webhook_and_scrape_problems(objs, certs_for(objs, tls, "team-x"))
    if tls == "cert-manager":
        crd = next(o for o in render(variant, tls, namespace="team-x") if o["kind"] == "CustomResourceDefinition"
                   and o["spec"]["conversion"]["strategy"] == "Webhook")
        assert crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "team-x/quotient-serving"
    gate = one(objs, "MutatingWebhookConfiguration", "quotient-pod-gate")
    assert gate["webhooks"][0]["clientConfig"]["service"]["namespace"] == "team-x"
    assert gate["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "team-x"]
    if tls == "cert-manager":
        assert gate["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "team-x/quotient-serving"


def webhook_and_scrape_problems(objs: list[dict], certs: Certs) -> list[str]:
    """The CRDs' conversion webhook reaches every replica's conversion port over a certificate for its name, and
    the PodMonitor's certificate has role metrics and may connect."""
    q = quotient_side(objs)
    out = pod_gate_problems(objs, certs)
    serving = certs.by_secret[q["serving"][0]]
    for crd in (o for o in objs if o["kind"] == "CustomResourceDefinition"):
        conversion = crd["spec"]["conversion"]
        if conversion["strategy"] != "Webhook":
            continue
        ref = conversion["webhook"]["clientConfig"]["service"]
        svc = one(objs, "Service", ref["name"])
        if ref["namespace"] != svc["metadata"]["namespace"] or svc["spec"]["selector"] != {
                "app.kubernetes.io/name": q["labels"]["app.kubernetes.io/name"]}:
            out.append(f"{crd['metadata']['name']}: webhook Service {ref} is not every Quotient replica")
        if _service_port_reaches(svc, ref["port"], q["container"]) != int(q["args"]["--conversion-port"]):
            out.append(f"{crd['metadata']['name']}: webhook port {ref['port']} is not --conversion-port")
        if f"{ref['name']}.{ref['namespace']}.svc" not in serving["sans"]:
            out.append(f"{ref['name']}.{ref['namespace']}.svc is not a name of Quotient's certificate")
        inject = crd["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from")
        if inject is not None:
            ns, name = inject.split("/")
            cert = one(objs, "Certificate", name)
            if ns != cert["metadata"]["namespace"] or cert["spec"]["secretName"] != q["serving"][0]:
                out.append(f"{crd['metadata']['name']}: inject-ca-from {inject} is not Quotient's serving certificate")
    for monitor in (o for o in objs if o["kind"] == "PodMonitor"):
        if not monitor["spec"]["selector"]["matchLabels"].items() <= q["labels"].items():
            out.append("the PodMonitor does not select Quotient's pods")
        for ep in monitor["spec"]["podMetricsEndpoints"]:
            if ep["port"] not in {p["name"] for p in q["container"]["ports"]} or ep["scheme"] != "https":
                out.append(f"PodMonitor endpoint {ep['port']} {ep['scheme']} is not Quotient's https port")
            t = ep["tlsConfig"]
            secret = {t["ca"]["secret"]["name"], t["cert"]["secret"]["name"], t["keySecret"]["name"]}
            if len(secret) != 1 or (t["ca"]["secret"]["key"], t["cert"]["secret"]["key"], t["keySecret"]["key"]) \
                    != ("ca.crt", "tls.crt", "tls.key"):
                out.append(f"PodMonitor tlsConfig is not one Secret's ca.crt/tls.crt/tls.key: {t}")
                continue
            cert = certs.by_secret.get(secret.pop())
            if cert is None or roles_of(q["config"], cert["cn"]) != {"metrics"}:
                out.append(f"Prometheus' certificate is not role metrics alone: {cert and cert['cn']}")
            if t["serverName"] not in serving["sans"]:
                out.append(f"PodMonitor serverName {t['serverName']} is not a name of Quotient's certificate")
        policy = one(objs, "NetworkPolicy", "quotient")
        if not any(r.get("from") and any("namespaceSelector" in f for f in r["from"])
                   and any(p["port"] in (q["port"], "https") for p in r["ports"]) for r in policy["spec"]["ingress"]):
            out.append("the NetworkPolicy does not let Prometheus' namespace reach port 8888")
    return out


GATE_RULE = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"],
             "scope": "Namespaced"}
GATE_POLICY = {"admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Ignore",
               "matchPolicy": "Equivalent", "reinvocationPolicy": "Never", "timeoutSeconds": 5}


def pod_gate_problems(objs: list[dict], certs: Certs) -> list[str]:
    """The pod gate (deploy/base/pod-gate.yaml) reaches every replica's webhook port at /mutate-pods over a
    certificate for its name whose CA is its caBundle (cert-manager's injector or certs.sh's patch), asks only
    about pod CREATEs with a queue label outside kube-system and Quotient's namespace, never blocks a pod, and
    Quotient gates (its Configuration lists pod) and may remove the gate (pods patch)."""
    q = quotient_side(objs)
    gates = [o for o in objs if o["kind"] == "MutatingWebhookConfiguration"]
    if [g["metadata"]["name"] for g in gates] != ["quotient-pod-gate"]:
        return [f"expected one MutatingWebhookConfiguration quotient-pod-gate, got {gates}"]
    (gate,) = gates
    if len(gate["webhooks"]) != 1:
        return [f"quotient-pod-gate has {len(gate['webhooks'])} webhooks, expected 1"]
    (hook,) = gate["webhooks"]
    out = [f"pod gate {k} is {hook.get(k)!r}, expected {v!r}" for k, v in GATE_POLICY.items() if hook.get(k) != v]
    if hook.get("rules") != [GATE_RULE]:
        out.append(f"pod gate rules {hook.get('rules')} are not pods CREATE in core v1")
    if hook.get("objectSelector") != {"matchExpressions": [{"key": "kueue.x-k8s.io/queue-name",
                                                            "operator": "Exists"}]}:
        out.append(f"pod gate objectSelector {hook.get('objectSelector')} is not the queue label")
    excluded = {v for e in hook.get("namespaceSelector", {}).get("matchExpressions", [])
                if (e["key"], e["operator"]) == ("kubernetes.io/metadata.name", "NotIn") for v in e["values"]}
    if not {"kube-system", q["namespace"]} <= excluded:
        out.append(f"pod gate namespaceSelector excludes {sorted(excluded)}, not kube-system and {q['namespace']}")
    ref = hook["clientConfig"].get("service") or {}
    svc = [o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == ref.get("name")
           and o["metadata"]["namespace"] == ref.get("namespace")]
    if not svc or svc[0]["spec"]["selector"] != {"app.kubernetes.io/name": q["labels"]["app.kubernetes.io/name"]}:
        out.append(f"pod gate Service {ref} is not every Quotient replica")
    elif _service_port_reaches(svc[0], ref.get("port", 443), q["container"]) != int(q["args"]["--conversion-port"]):
        out.append(f"pod gate port {ref.get('port')} is not --conversion-port")
    if ref.get("path") != "/mutate-pods":
        out.append(f"pod gate path {ref.get('path')} is not /mutate-pods")
    serving_secret = q["serving"][0]
    if f"{ref.get('name')}.{ref.get('namespace')}.svc" not in certs.by_secret[serving_secret]["sans"]:
        out.append(f"{ref.get('name')}.{ref.get('namespace')}.svc is not a name of Quotient's certificate")
    inject = gate["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from")
    bundle = certs.bundles.get("quotient-pod-gate")
    if (inject is None) == (bundle is None):
        out.append(f"pod gate caBundle: inject-ca-from {inject!r} and certs.sh's patch {bundle is not None}: "
                   "expected exactly one")
    elif inject is not None:
        ns, name = inject.split("/")
        cert = [o for o in objs if o["kind"] == "Certificate" and o["metadata"]["name"] == name]
        if not cert or ns != cert[0]["metadata"]["namespace"] or cert[0]["spec"]["secretName"] != serving_secret:
            out.append(f"pod gate inject-ca-from {inject} is not Quotient's serving certificate")
    elif bundle != certs.files[(serving_secret, "ca.crt")].read_text():
        out.append("certs.sh's pod gate caBundle is not the CA of Quotient's serving certificate")
    if "caBundle" in hook["clientConfig"]:
        out.append("pod gate ships a caBundle: it is injected or patched in at install")
    if not decode_configuration(q["config"]).gate_pods:
        out.append("Quotient's Configuration does not list pod in integrations.frameworks: nothing is gated")
    account = q["pod"]["serviceAccountName"]
    bound = {b["roleRef"]["name"] for b in objs if b["kind"] == "ClusterRoleBinding"
             and {"kind": "ServiceAccount", "name": account, "namespace": q["namespace"]} in b["subjects"]}
    if not any(o["kind"] == "ClusterRole" and o["metadata"]["name"] in bound and any(
            "" in r["apiGroups"] and "pods" in r["resources"] and "patch" in r["verbs"] for r in o["rules"])
            for o in objs):
        out.append(f"ServiceAccount {account} may not patch pods in every namespace: no gate can be removed")
    return out


def test_the_pod_gate_check_catches_each_way_it_can_go_wrong():
    objs = render("second-scheduler")
    certs = Certs.from_cert_manager(objs)
    assert pod_gate_problems(objs, certs) == []

    def broken(change) -> list[str]:
        copy = yaml.safe_load(yaml.safe_dump(objs))
        change(copy, one(copy, "MutatingWebhookConfiguration", "quotient-pod-gate")["webhooks"][0])
        return pod_gate_problems(copy, certs)

    def config(objs, hook):
        cm = one(objs, "ConfigMap", "quotient-config")
        cfg = yaml.safe_load(cm["data"]["config.yaml"])
        cfg["integrations"]["frameworks"] = ["batch/job"]
        cm["data"]["config.yaml"] = yaml.safe_dump(cfg)

    def rbac(objs, hook):
        for r in one(objs, "ClusterRole", "quotient")["rules"]:
            if r["resources"] == ["pods"]:
                r["verbs"] = [v for v in r["verbs"] if v != "patch"]

    for change, message in [
        (lambda o, h: h["clientConfig"]["service"].update(port=8888), "is not --conversion-port"),
        (lambda o, h: h["clientConfig"]["service"].update(path="/convert"), "is not /mutate-pods"),
        (lambda o, h: h["clientConfig"]["service"].update(name="quotient"), "is not every Quotient replica"),
        (lambda o, h: h.update(failurePolicy="Fail"), "failurePolicy"),
        (lambda o, h: h.update(timeoutSeconds=30), "timeoutSeconds"),
        (lambda o, h: h["rules"][0].update(operations=["CREATE", "UPDATE"]), "not pods CREATE"),
        (lambda o, h: h.pop("objectSelector"), "objectSelector"),
        (lambda o, h: h["namespaceSelector"]["matchExpressions"][0].update(values=["kube-system"]),
         "namespaceSelector excludes ['kube-system']"),
        (lambda o, h: one(o, "MutatingWebhookConfiguration")["metadata"].pop("annotations"), "expected exactly one"),
        (lambda o, h: one(o, "MutatingWebhookConfiguration")["metadata"]["annotations"].update(
            {"cert-manager.io/inject-ca-from": "quotient-system/quotient-scheduler"}), "not Quotient's serving"),
        (config, "does not list pod"),
        (rbac, "may not patch pods"),
    ]:
        problems = broken(change)
        assert any(message in p for p in problems), (message, problems)


@pytest.mark.skipif(OPENSSL is None, reason="needs the openssl command")
def test_certs_sh_makes_the_secrets_the_variants_mount_with_one_certificate_per_role():
    made = Certs.from_certs_sh("team-x")
    certs = made.by_secret
    assert set(certs) == {"quotient-tls", "quotient-scheduler-tls", "quotient-metrics-tls"}
    # the pod gate's caBundle: the CA that signed the serving certificate, patched into its one webhook
    assert set(made.bundles) == {"quotient-pod-gate"}
    assert made.bundles["quotient-pod-gate"] == made.files[("quotient-tls", "ca.crt")].read_text()
    assert {"quotient.team-x.svc", "quotient.team-x.svc.cluster.local", "quotient-webhook.team-x.svc",
            "quotient-webhook.team-x.svc.cluster.local", "localhost", "127.0.0.1"} <= certs["quotient-tls"]["sans"]
    config = quotient_side(render("second-scheduler", "certs-sh"))["config"]
    assert roles_of(config, certs["quotient-scheduler-tls"]["cn"]) == {"scheduler"}
    assert roles_of(config, certs["quotient-metrics-tls"]["cn"]) == {"metrics"}
    assert roles_of(config, certs["quotient-tls"]["cn"]) == set()       # the serving certificate calls nothing
    for variant in VARIANTS:       # every Secret the variants mount is one certs.sh makes
        objs = render(variant, "certs-sh", ("prometheus",))
        mounted = {v["secret"]["secretName"] for d in objs if d["kind"] == "Deployment"
                   for v in d["spec"]["template"]["spec"]["volumes"] if "secret" in v}
        named = {ep["tlsConfig"]["keySecret"]["name"] for o in objs if o["kind"] == "PodMonitor"
                 for ep in o["spec"]["podMetricsEndpoints"]}
        assert mounted | named <= set(certs), (variant, mounted | named)


def test_the_cert_manager_component_makes_the_same_secrets_and_roles():
    objs = render("second-scheduler", "cert-manager", ("prometheus",))
    certs = Certs.from_cert_manager(objs).by_secret
    assert {"quotient-tls", "quotient-scheduler-tls", "quotient-metrics-tls", "quotient-admin-tls",
            "quotient-viewer-tls"} <= set(certs)
    config = quotient_side(objs)["config"]
    for secret, role in (("quotient-scheduler-tls", "scheduler"), ("quotient-metrics-tls", "metrics"),
                         ("quotient-admin-tls", "admin"), ("quotient-viewer-tls", "viewer")):
        assert roles_of(config, certs[secret]["cn"]) == {role}, secret
    ca = one(objs, "Certificate", "quotient-ca")["spec"]
    assert ca["isCA"] is True and one(objs, "Issuer", "quotient-selfsigned")["spec"] == {"selfSigned": {}}
    assert one(objs, "Issuer", "quotient-ca")["spec"] == {"ca": {"secretName": ca["secretName"]}}
    assert {c["spec"]["issuerRef"]["name"] for c in objs if c["kind"] == "Certificate"} == {"quotient-selfsigned",
                                                                                            "quotient-ca"}
    crds = [o for o in objs if o["kind"] == "CustomResourceDefinition"]
    webhook = [c for c in crds if c["spec"]["conversion"]["strategy"] == "Webhook"]
    assert len(webhook) == 4 and all("cert-manager.io/inject-ca-from" in c["metadata"]["annotations"] for c in webhook)
    assert all("annotations" not in c["metadata"] for c in crds if c not in webhook)  # strategy None: no webhook
    assert all("caBundle" not in c["spec"]["conversion"].get("webhook", {}).get("clientConfig", {}) for c in crds)
    gate = one(objs, "MutatingWebhookConfiguration", "quotient-pod-gate")
    assert gate["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": "quotient-system/quotient-serving"}


def test_the_deployment_is_highly_available_as_the_interfaces_say():
    objs = render("second-scheduler")
    d = one(objs, "Deployment", "quotient")
    spec, pod = d["spec"], d["spec"]["template"]["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    assert pod["priorityClassName"] == "system-cluster-critical"
    (c,) = pod["containers"]
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/livez"), ("startupProbe", "/livez")):
        get = c[probe]["httpGet"]
        assert (get["scheme"], get["path"]) == ("HTTPS", path) and get["port"] in ("https", 8888), probe
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"] if "valueFrom" in e}
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    pdb = one(objs, "PodDisruptionBudget", "quotient")["spec"]
    assert pdb["minAvailable"] == 1 and pdb["selector"]["matchLabels"].items() <= \
        d["spec"]["template"]["metadata"]["labels"].items()
    role = one(objs, "Role", "quotient-leader-election")
    grants = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
              for v in rule["verbs"]}
    assert {("", "pods", "get"), ("", "pods", "patch")} <= grants
    assert not {g for g in grants if g[1] == "pods" and g[2] not in ("get", "patch")}
    assert one(objs, "Service", "quotient")["spec"]["selector"] == {"app.kubernetes.io/name": "quotient",
                                                                    "quotient.dev/leader": "true"}
    assert one(objs, "Service", "quotient-webhook")["spec"]["selector"] == {"app.kubernetes.io/name": "quotient"}


def test_the_second_schedulers_lease_is_in_its_own_namespace_and_its_rbac_names_it():
    objs = render("second-scheduler", "cert-manager", namespace="team-x")
    cfg, _ = scheduler_config_of(objs, "second-scheduler")
    (c,) = one(objs, "Deployment", "quotient-scheduler")["spec"]["template"]["spec"]["containers"]
    assert "resourceNamespace" not in cfg["leaderElection"]
    assert _args(c)["--leader-elect-resource-namespace"] == "$(POD_NAMESPACE)"
    assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]} == \
        {"POD_NAMESPACE": "metadata.namespace"}
    role = one(objs, "Role", "quotient-scheduler-leader-election")
    assert role["metadata"]["namespace"] == "team-x"
    assert [r["resourceNames"] for r in role["rules"] if r.get("resourceNames")] == \
        [[cfg["leaderElection"]["resourceName"]]]
    policy = one(objs, "NetworkPolicy", "quotient")["spec"]["ingress"]
    pod_labels = one(objs, "Deployment", "quotient-scheduler")["spec"]["template"]["metadata"]["labels"]
    (main,) = [r for r in policy if any(p["port"] == 8888 for p in r["ports"])]    # the scheduler's pods alone
    (source,) = main["from"]
    assert source.keys() == {"podSelector"} and source["podSelector"]["matchLabels"].items() <= pod_labels.items()
    main_policy = one(render("main-scheduler"), "NetworkPolicy", "quotient")["spec"]["ingress"]
    assert [r.get("from") for r in main_policy if any(p["port"] == 8888 for p in r["ports"])] == [None]


@pytest.mark.parametrize("variant, shipped", [("second-scheduler", "https.yaml"), ("main-scheduler", "main-scheduler.yaml")])
def test_the_scheduler_config_files_are_what_the_variants_ship(variant, shipped):
    """scheduler-config/https.yaml and main-scheduler.yaml (for running elsewhere, and the commented reference)
    are the variants' configurations in namespace quotient-system; the second scheduler's Lease namespace is
    the flag's in the cluster (the file names it for running outside)."""
    cfg, _ = scheduler_config_of(render(variant), variant)
    text = (ROOT / "scheduler-config" / shipped).read_text()
    assert kube_scheduler_config.decode(text) == []
    expected = kube_scheduler_config.load(text)
    if variant == "second-scheduler":
        assert expected["leaderElection"].pop("resourceNamespace") == "quotient-system"
    assert cfg == expected


@pytest.mark.parametrize("shipped", ["https.yaml", "main-scheduler.yaml"])
def test_the_scheduler_config_files_agree_with_the_quotient_deployed(shipped):
    variant = {"https.yaml": "second-scheduler", "main-scheduler.yaml": "main-scheduler"}[shipped]
    for tls in TLS_SOURCES:
        objs = render(variant, tls)
        _, files = scheduler_config_of(objs, variant)
        cfg = kube_scheduler_config.load((ROOT / "scheduler-config" / shipped).read_text())
        assert agreement(objs, cfg, files, certs_for(objs, tls, "quotient-system")) == [], tls


def test_http_yaml_decodes_and_names_the_service_port_and_prefix():
    """scheduler-config/http.yaml is for a Quotient no variant deploys (plain HTTP, --insecure-no-client-auth:
    deploy/README.md, "Plain HTTP"); it still names the Service, port and path prefix the variants have."""
    text = (ROOT / "scheduler-config" / "http.yaml").read_text()
    assert kube_scheduler_config.decode(text) == []
    cfg = kube_scheduler_config.load(text)
    problems = agreement(render("second-scheduler"), cfg, {}, Certs.from_cert_manager(render("second-scheduler")))
    assert problems[0] == "kube-scheduler calls http (enableHTTPS False) but Quotient serves https"
    assert not [p for p in problems if "Service" in p or "port" in p or "pathPrefix" in p], problems


OLD_MAIN_SCHEDULER_EXTENDER = {     # scheduler-config/main-scheduler.yaml before issue 33
    "urlPrefix": "http://quotient.quotient-system.svc:8888/scheduler", "filterVerb": "filter",
    "preemptVerb": "preempt", "bindVerb": "bind", "nodeCacheCapable": True, "ignorable": False,
    "httpTimeout": "10s", "enableHTTPS": False, "managedResources": []}


def test_the_agreement_check_catches_each_way_the_two_sides_can_disagree():
    objs = render("main-scheduler")
    certs = Certs.from_cert_manager(objs)
    good, files = scheduler_config_of(objs, "main-scheduler")
    assert agreement(objs, good, files, certs) == []

    def broken(change, in_objs=None) -> list[str]:
        cfg = yaml.safe_load(yaml.safe_dump(good))
        ext = cfg["extenders"][0]
        change(ext)
        return agreement(in_objs or objs, cfg, files, certs)

    old = broken(lambda e: (e.clear(), e.update(OLD_MAIN_SCHEDULER_EXTENDER)))
    assert any("calls http" in p for p in old), old
    assert any("urlPrefix port 9443" in p for p in broken(lambda e: e.update(
        urlPrefix=e["urlPrefix"].replace(":8888", ":9443"))))
    assert any("pathPrefix" in p for p in broken(lambda e: e.update(urlPrefix=e["urlPrefix"] + "x")))
    assert any("namespace" in p for p in broken(lambda e: e.update(
        urlPrefix=e["urlPrefix"].replace("quotient-system", "kube-system"))))
    assert any("no Service" in p for p in broken(lambda e: e.update(urlPrefix=e["urlPrefix"].replace(
        "//quotient.", "//quotient-api."))))
    assert any("serverName" in p for p in broken(lambda e: e["tlsConfig"].update(serverName="quotient")))
    assert any("caFile" in p for p in broken(lambda e: e["tlsConfig"].update(caFile="/etc/kubernetes/pki/ca.crt")))
    assert any("keyFile" in p for p in broken(lambda e: e["tlsConfig"].update(
        keyFile=e["tlsConfig"]["certFile"])))
    assert any("insecure" in p for p in broken(lambda e: e["tlsConfig"].update(insecure=True)))
    # Quotient's side changed instead: another port, a path prefix, a Configuration without the scheduler's CN.
    moved = yaml.safe_load(yaml.safe_dump(objs))
    (c,) = one(moved, "Deployment", "quotient")["spec"]["template"]["spec"]["containers"]
    c["args"][c["args"].index("--port") + 1] = "8443"
    next(p for p in c["ports"] if p["name"] == "https")["containerPort"] = 8443
    assert agreement(moved, good, files, certs) == []      # the Service's named targetPort follows
    next(p for p in one(moved, "Service", "quotient")["spec"]["ports"]).update(targetPort=8888)
    assert any("--port" in p for p in agreement(moved, good, files, certs))
    renamed = yaml.safe_load(yaml.safe_dump(objs))
    cm = one(renamed, "ConfigMap", "quotient-config")
    config = yaml.safe_load(cm["data"]["config.yaml"])
    config["clientIdentities"] = [i for i in config["clientIdentities"] if i["role"] != "scheduler"]
    cm["data"]["config.yaml"] = yaml.safe_dump(config)
    assert any("no role scheduler" in p for p in agreement(renamed, good, files, certs))
    other_ca = yaml.safe_load(yaml.safe_dump(objs))
    one(other_ca, "Certificate", "quotient-scheduler")["spec"]["issuerRef"]["name"] = "quotient-selfsigned"
    assert any("did not sign" in p for p in agreement(other_ca, good, files, Certs.from_cert_manager(other_ca)))


def test_the_strict_decoder_refuses_what_kube_scheduler_refuses():
    text = (ROOT / "scheduler-config" / "main-scheduler.yaml").read_text()
    good = kube_scheduler_config.load(text)
    assert kube_scheduler_config.decode(good) == []
    recorded = ROOT.parent / "shared" / "wire" / "kube-scheduler-config.yaml"
    if recorded.exists():       # the config a real kube-scheduler v1.36.2 ran with
        assert kube_scheduler_config.decode(recorded.read_text()) == []
    for change, why in [
        (lambda c: c["extenders"][0].update(nodeCachable=True), "unknown field"),
        (lambda c: c["extenders"][0].update(urlprefix=c["extenders"][0].pop("urlPrefix")), "the field is 'urlPrefix'"),
        (lambda c: c["extenders"][0]["tlsConfig"].update(caFiles="x"), "unknown field"),
        (lambda c: c["extenders"][0].update(httpTimeout="10 seconds"), "not a duration"),
        (lambda c: c["extenders"][0].update(weight="2"), "not an integer"),
        (lambda c: c["extenders"][0].update(enableHTTPS="true"), "not a bool"),
        (lambda c: c["extenders"][0]["tlsConfig"].update(caData="not base64!"), "not base64"),
        (lambda c: c["leaderElection"].update(leaseDuration=15), "not a duration"),
        (lambda c: c["clientConnection"].update(kubeConfig="x"), "the field is 'kubeconfig'"),
        (lambda c: c.update(percentageOfNodesToScore=2**31), "range"),
        (lambda c: c["profiles"][0]["plugins"]["score"].update(enable=[]), "unknown field"),
        (lambda c: c["profiles"][0]["pluginConfig"][0]["args"]["scoringStrategy"].update(kind="x"), "unknown field"),
        (lambda c: c.update(apiVersion="kubescheduler.config.k8s.io/v1beta3"), "is not"),
        (lambda c: c.update(extenders=[c["extenders"][0], dict(c["extenders"][0])]), "only one extender"),
    ]:
        bad = yaml.safe_load(yaml.safe_dump(good))
        change(bad)
        problems = kube_scheduler_config.decode(bad)
        assert any(why in p for p in problems), (why, problems)
    assert any("duplicate" in p for p in kube_scheduler_config.decode(text + "percentageOfNodesToScore: 50\n"))


def test_kubernetes_validate_is_strict_about_built_in_kinds_and_our_crd_kind_schemas_about_theirs():
    objs = render("second-scheduler", "cert-manager", ("prometheus",))
    deployment = yaml.safe_load(yaml.safe_dump(one(objs, "Deployment", "quotient")))
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    assert any("readinessProbes" in p for p in schema_problems(deployment))
    deployment = yaml.safe_load(yaml.safe_dump(one(objs, "Deployment", "quotient")))
    deployment["spec"]["replicas"] = "2"
    assert schema_problems(deployment)
    cert = yaml.safe_load(yaml.safe_dump(one(objs, "Certificate", "quotient-scheduler")))
    cert["spec"]["usages"] = ["client-auth"]
    assert schema_problems(cert)
    cert["spec"]["usages"] = ["client auth"]
    cert["spec"]["dnsName"] = ["x"]
    assert any("unknown field" in p for p in schema_problems(cert))
    monitor = yaml.safe_load(yaml.safe_dump(one(objs, "PodMonitor", "quotient")))
    monitor["spec"]["podMetricsEndpoints"][0]["tlsConfig"]["keySecret"].pop("key")
    assert schema_problems(monitor)
    rule = yaml.safe_load(yaml.safe_dump(one(objs, "PrometheusRule", "quotient-kueue-names")))
    assert schema_problems(rule) == []
    rule["spec"]["groups"][0]["rules"][0]["recrd"] = rule["spec"]["groups"][0]["rules"][0].pop("record")
    assert any("unknown field" in p for p in schema_problems(rule))
    assert schema_problems({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})


def test_the_kueue_component_leaves_quotients_crds_out_and_the_docs_say_so_loudly():
    with_kueue = render("second-scheduler", "cert-manager", ("kueue",))
    assert not [o for o in with_kueue if o["kind"] == "CustomResourceDefinition"]
    without = {o["metadata"]["name"] for o in render("second-scheduler") if o["kind"] == "CustomResourceDefinition"}
    assert without == {f"{p}.kueue.x-k8s.io" for p in ("resourceflavors", "clusterqueues", "localqueues", "cohorts",
                                                      "workloadpriorityclasses", "topologies")}
    for doc in ("README.md", "deploy/README.md"):
        text = (ROOT / doc).read_text()
        assert "components/kueue" in text and re.search(r"\*\*[^*]*Kueue[^*]*already installed[^*]*\*\*", text,
                                                        re.I), doc


def test_the_readme_copy_steps_for_the_main_scheduler_name_what_the_variant_ships():
    text = (ROOT / "deploy" / "README.md").read_text()
    section = text[text.index("## Main scheduler"):]
    section = section[:section.index("\n## ", 1)]
    objs = render("main-scheduler")
    one(objs, "ConfigMap", "quotient-main-scheduler-config")
    assert "quotient-main-scheduler-config" in section and "quotient-scheduler-tls" in section
    assert MAIN_SCHEDULER_DIR in section and "ClusterFirstWithHostNet" in section
    for key in ("ca.crt", "tls.crt", "tls.key", "config.yaml"):
        assert key in section, key


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_readme_commands_apply_the_variants(variant):
    for doc in ("README.md", "deploy/README.md"):
        assert f"kubectl apply --server-side --field-manager=quotient -k deploy/{variant}" in (ROOT / doc).read_text()


@pytest.mark.skipif(OPENSSL is None, reason="needs the openssl command")
@pytest.mark.parametrize("variant", VARIANTS)
def test_kube_scheduler_as_configured_calls_the_quotient_as_deployed_over_real_tls(variant, tmp_path):
    """The agreement, run: `quotient serve` with the variant's own arguments and Configuration (files from the
    Secrets certs.sh makes, the bundled demo snapshot instead of a cluster), called as the variant's
    KubeSchedulerConfiguration says (urlPrefix path, serverName, caFile, certFile, keyFile), only the Service
    address replaced by 127.0.0.1 and the port it reaches. filter answers."""
    import ssl

    import httpx

    from serving import QUOTIENT_BIN, free_port, stop_process

    objs = render(variant, "certs-sh")
    certs = Certs.from_certs_sh("quotient-system")
    q = quotient_side(objs)
    config = dict(q["config"])
    import app.config

    if "clientIdentities" not in Path(app.config.__file__).read_text():
        config.pop("clientIdentities")      # until app/config.py knows it (issue 33, the TLS change): its default map
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    args, words, i = [], q["container"]["args"], 1      # [0] is "serve"
    while i < len(words):
        flag, value = words[i], words[i + 1]
        i += 2
        if flag in ("--tls-cert", "--tls-key", "--tls-client-ca"):
            value = str(certs.files[_mounted(q["pod"], q["container"], value)])
        elif flag == "--config":
            value = str(tmp_path / "config.yaml")
        elif flag == "--host":
            value = "127.0.0.1"
        elif flag in ("--port", "--conversion-port"):
            value = str(port if flag == "--port" else free_port())
        args += [flag, value]
    cfg, files = scheduler_config_of(objs, variant)
    (ext,) = cfg["extenders"]
    tls = ext["tlsConfig"]
    ctx = ssl.create_default_context(cafile=str(certs.files[files[tls["caFile"]]]))
    ctx.load_cert_chain(str(certs.files[files[tls["certFile"]]]), str(certs.files[files[tls["keyFile"]]]))
    url = urlsplit(ext["urlPrefix"])._replace(netloc=f"127.0.0.1:{port}").geturl()
    pod = {"metadata": {"name": "try-1", "namespace": "team-a", "uid": "try-1",
                        "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}
    with open(tmp_path / "serve.log", "wb") as log:
        proc = subprocess.Popen([str(QUOTIENT_BIN), "serve", *args, "--snapshot",
                                 str(ROOT / "app" / "data" / "demo-snapshot.yaml")],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=str(ROOT))
    try:
        import time

        deadline = time.monotonic() + 30
        with httpx.Client(verify=ctx, timeout=5, trust_env=False) as client:
            while True:
                assert proc.poll() is None, (tmp_path / "serve.log").read_text()
                try:
                    answer = client.post(f"{url}/{ext['filterVerb']}", extensions={"sni_hostname": tls["serverName"]},
                                         json={"Pod": pod, "Nodes": None, "NodeNames": ["od-1", "spot-1"]})
                    break
                except httpx.ConnectError as e:
                    if "CERTIFICATE_VERIFY_FAILED" in str(e) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        assert answer.status_code == 200, answer.text
        assert answer.json()["NodeNames"] == ["od-1"]
    finally:
        stop_process(proc)


def test_an_overlay_of_the_admins_own_moves_everything_with_namespace_and_the_transformer():
    """deploy/README.md, "Apply": an overlay that includes a variant as a resource sets `namespace:` and lists
    namespace-strings under `transformers:`; nothing is left in quotient-system, and both sides agree."""
    mine = _tree() / "mine"
    mine.mkdir(exist_ok=True)
    (mine / "kustomization.yaml").write_text(yaml.safe_dump({
        "namespace": "team-y", "resources": ["../second-scheduler"], "components": ["../components/prometheus"],
        "transformers": ["../namespace-strings"]}))
    text = kustomize(mine)
    assert "quotient-system" not in text
    objs = [d for d in yaml.safe_load_all(text) if d]
    cfg, files = scheduler_config_of(objs, "second-scheduler")
    assert agreement(objs, cfg, files, Certs.from_cert_manager(objs)) == []
    assert not webhook_and_scrape_problems(objs, Certs.from_cert_manager(objs))
