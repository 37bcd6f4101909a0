#!/usr/bin/env bash
# Certificates without cert-manager (deploy/README.md, "TLS"): a private CA, Quotient's serving certificate and
# one client certificate per caller, each CN a role in Quotient's clientIdentities (deploy/base/quotient.yaml):
# quotient-scheduler (kube-scheduler: the verbs), quotient-metrics (Prometheus: /metrics), quotient-admin and
# quotient-viewer (people). Then the Secrets the variants mount, as cert-manager would make them (tls.crt,
# tls.key, ca.crt): quotient-tls (Quotient), quotient-scheduler-tls (kube-scheduler), quotient-metrics-tls
# (Prometheus); and the CA as the caBundle of the conversion webhook of Quotient's own CRDs (deploy/crds; never
# Kueue's) and of the pod gate's MutatingWebhookConfiguration quotient-pod-gate (deploy/base/pod-gate.yaml).
# Run it after `kubectl apply -k deploy/<variant>` (the namespace, CRDs and webhook configuration then exist;
# the pods wait for the Secrets).
#
#   deploy/certs.sh [--namespace NS] [--dir DIR] [--days N] [--no-apply]
#
# NS (default quotient-system) is the variant's `namespace:`; the serving certificate names its Services there.
# DIR (default ./quotient-certs) keeps the files: ca.key stays with you, admin.crt/admin.key (or viewer.*) are
# what `curl --cacert ca.crt --cert admin.crt --key admin.key` needs. --no-apply only writes the files. Run it
# again (a new CA) to rotate: the Secrets and the caBundle are replaced; Quotient reloads its certificate files
# when they change, the second kube-scheduler reads its own at start
# (`kubectl -n NS rollout restart deploy/quotient-scheduler`).
set -euo pipefail

dir=./quotient-certs
days=365
apply=1
namespace=quotient-system
while [ $# -gt 0 ]; do
  case "$1" in
    --namespace|-n) namespace=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --days) days=$2; shift 2 ;;
    --no-apply) apply=0; shift ;;
    *) echo "usage: $0 [--namespace NS] [--dir DIR] [--days N] [--no-apply]" >&2; exit 2 ;;
  esac
done
command -v openssl >/dev/null || { echo "$0: needs the openssl command" >&2; exit 2; }
mkdir -p "$dir"
cd "$dir"
umask 077

issue() {  # name subject extensions
  printf '%b' "$3" > "$1.ext"
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" -sha256 \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days "$days" -sha256 \
  -subj "/CN=quotient-ca" -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
leaf="basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
# The names kube-scheduler (serverName) and kube-apiserver (the conversion webhook's Service) verify, and
# loopback for port-forward.
san=""
for svc in quotient quotient-webhook; do
  san="${san}DNS:$svc.$namespace.svc,DNS:$svc.$namespace.svc.cluster.local,"
done
issue server "/CN=quotient.$namespace.svc" "${leaf}extendedKeyUsage=serverAuth\nsubjectAltName=${san}DNS:localhost,IP:127.0.0.1\n"
for who in scheduler metrics admin viewer; do
  issue "$who" "/CN=quotient-$who" "${leaf}extendedKeyUsage=clientAuth\n"
done
echo "certificates in $dir: ca.crt, server.*, scheduler.*, metrics.*, admin.*, viewer.* (valid $days days)"

if [ "$apply" = 1 ]; then
  kubectl get namespace "$namespace" >/dev/null || {
    echo "$0: no namespace $namespace: apply the variant first (kubectl apply --server-side -k deploy/<variant>)" >&2
    exit 2; }
  secret() {  # name cert key
    kubectl -n "$namespace" create secret generic "$1" --from-file=tls.crt="$2.crt" \
      --from-file=tls.key="$2.key" --from-file=ca.crt=ca.crt --dry-run=client -o yaml | kubectl apply -f -
  }
  secret quotient-tls server
  secret quotient-scheduler-tls scheduler
  secret quotient-metrics-tls metrics
fi

# kube-apiserver verifies the conversion webhook's certificate against the CRDs' caBundle. Only
# CRDs labelled as Quotient's (deploy/crds/crds.yaml) with strategy Webhook: Kueue's own CRDs name
# Kueue's webhook and keep Kueue's CA.
bundle=$(base64 < ca.crt | tr -d '\n')
patch="{\"spec\":{\"conversion\":{\"webhook\":{\"clientConfig\":{\"caBundle\":\"$bundle\"}}}}}"
webhook_crds='{range .items[?(@.spec.conversion.strategy=="Webhook")]}{.metadata.name}{"\n"}{end}'
crds=""
[ "$apply" = 0 ] || crds=$(kubectl get crd -l app.kubernetes.io/name=quotient -o jsonpath="$webhook_crds")
for crd in $crds; do
  kubectl patch crd "$crd" --type merge -p "$patch"
done
if [ -z "$crds" ]; then
  echo "no CRDs of deploy/crds patched; once they are applied, set their caBundle:"
  echo "  for crd in \$(kubectl get crd -l app.kubernetes.io/name=quotient -o jsonpath='$webhook_crds'); do"
  echo "    kubectl patch crd \$crd --type merge -p '$patch'; done"
fi
# kube-apiserver verifies the pod gate's certificate against its MutatingWebhookConfiguration's caBundle (a
# JSON patch: a merge patch would replace the whole webhooks list).
gate_patch="[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$bundle\"}]"
if [ "$apply" = 1 ] && kubectl get mutatingwebhookconfiguration quotient-pod-gate >/dev/null; then
  kubectl patch mutatingwebhookconfiguration quotient-pod-gate --type json -p "$gate_patch"
else
  echo "MutatingWebhookConfiguration quotient-pod-gate not patched; once it is applied, set its caBundle:"
  echo "  kubectl patch mutatingwebhookconfiguration quotient-pod-gate --type json -p '$gate_patch'"
fi
